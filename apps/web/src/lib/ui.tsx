// Small shared pieces: error display, labelled fields, a once-shown secret with a copy button, async actions.
import { useCallback, useEffect, useId, useState, type ReactNode } from 'react';
import { ApiError } from '../api/client';

export function messageOf(error: unknown): string {
  if (error instanceof ApiError) return error.detail;
  return error instanceof Error ? error.message : String(error);
}

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p role="alert" className="error">
      {messageOf(error)}
    </p>
  );
}

export function Field(props: {
  label: string;
  name: string;
  type?: string;
  value: string;
  onChange(value: string): void;
  required?: boolean;
  autoComplete?: string;
  placeholder?: string;
  inputMode?: 'numeric' | 'text';
}) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{props.label}</label>
      <input
        id={id}
        name={props.name}
        type={props.type ?? 'text'}
        value={props.value}
        required={props.required}
        autoComplete={props.autoComplete}
        placeholder={props.placeholder}
        inputMode={props.inputMode}
        onChange={(e) => props.onChange(e.target.value)}
      />
    </div>
  );
}

/** A key value or signing secret: shown once, with a warning and a copy button. */
export function OnceSecret({ label, value, children }: { label: string; value: string; children?: ReactNode }) {
  const [copied, setCopied] = useState(false);
  return (
    <section className="secret" aria-label={label}>
      <p className="warning">
        <strong>{label}:</strong> copy it now. It is shown only once and cannot be shown again.
      </p>
      <code data-testid="secret-value">{value}</code>{' '}
      <button
        type="button"
        onClick={() => navigator.clipboard?.writeText(value).then(() => setCopied(true), () => setCopied(false))}
      >
        {copied ? 'Copied' : 'Copy'}
      </button>
      {children}
    </section>
  );
}

/** Loads data on mount and on reload(); error holds the API's detail. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [data, setData] = useState<T | undefined>();
  const [error, setError] = useState<unknown>();
  const [version, setVersion] = useState(0);
  useEffect(() => {
    let live = true;
    setError(undefined);
    load().then(
      (value) => live && setData(value),
      (err) => live && setError(err),
    );
    return () => {
      live = false;
    };
  }, [...deps, version]);
  const reload = useCallback(() => setVersion((v) => v + 1), []);
  return { data, error, reload };
}

/** Runs a form action: busy while it runs, error on failure. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const run = useCallback(async (action: () => Promise<void>) => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run };
}

export function When({ at }: { at?: string | null }) {
  if (!at) return <span>—</span>;
  return <time dateTime={at}>{new Date(at).toLocaleString()}</time>;
}
