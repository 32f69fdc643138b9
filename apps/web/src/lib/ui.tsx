// Small shared pieces: error display, labelled fields, a once-shown secret with a copy button, async actions.
import { useCallback, useEffect, useId, useRef, useState, type ReactNode } from 'react';
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

/** One page of a list the API pages by cursor. */
export interface ListPage<T> {
  data?: T[];
  next_cursor?: string | null;
}

/**
 * A list the API pages: its first page on mount and on reload(), then more() appends the next page while there is
 * one. `data` has a page's shape ({data, next_cursor}) with every row loaded so far. A reload or a change of `deps`
 * starts over; a page that arrives for an earlier start is dropped.
 */
export function usePagedLoad<T>(loadPage: (cursor: string | undefined) => Promise<ListPage<T>>, deps: unknown[] = []) {
  const [rows, setRows] = useState<{ data: T[]; next_cursor: string | null } | undefined>();
  const [error, setError] = useState<unknown>();
  const [loadingMore, setLoadingMore] = useState(false);
  const [version, setVersion] = useState(0);
  const start = useRef(0);
  const latestLoad = useRef(loadPage);
  latestLoad.current = loadPage;
  useEffect(() => {
    const mine = ++start.current;
    setError(undefined);
    setLoadingMore(false);
    loadPage(undefined).then(
      (page) => mine === start.current && setRows({ data: page.data ?? [], next_cursor: page.next_cursor ?? null }),
      (err) => mine === start.current && setError(err),
    );
  }, [...deps, version]);
  const more = useCallback(() => {
    const cursor = rows?.next_cursor;
    if (!cursor) return;
    const mine = start.current;
    setLoadingMore(true);
    latestLoad.current(cursor).then(
      (page) => {
        if (mine !== start.current) return;
        setRows((loaded) => loaded && { data: [...loaded.data, ...(page.data ?? [])], next_cursor: page.next_cursor ?? null });
        setLoadingMore(false);
      },
      (err) => {
        if (mine !== start.current) return;
        setError(err);
        setLoadingMore(false);
      },
    );
  }, [rows]);
  const reload = useCallback(() => setVersion((v) => v + 1), []);
  return { data: rows, error, reload, more, loadingMore };
}

/** "Show more" under a paged list (usePagedLoad), while the API has more of it. */
export function ShowMore({ list, what }: { list: { data?: { next_cursor: string | null }; more(): void; loadingMore: boolean }; what: string }) {
  if (!list.data?.next_cursor) return null;
  return (
    <button type="button" className="show-more" onClick={list.more} disabled={list.loadingMore}>
      {list.loadingMore ? 'Loading…' : `Show more ${what}`}
    </button>
  );
}

/**
 * Every page of a list, for a lookup that must see all of it (whose each API key is); stops after `maxPages`
 * pages so a huge organization cannot keep the page loading forever.
 */
export async function loadAllPages<T>(loadPage: (cursor: string | undefined) => Promise<ListPage<T>>, maxPages = 50): Promise<{ data: T[] }> {
  const data: T[] = [];
  let cursor: string | undefined;
  for (let n = 0; n < maxPages; n++) {
    const page = await loadPage(cursor);
    data.push(...(page.data ?? []));
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  return { data };
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
