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

/** The rows of a paged list loaded so far, from which load (`start`), over how many pages. */
interface LoadedPages<T> {
  data: T[];
  next_cursor: string | null;
  pages: number;
  start: number;
}

/** The first `pages` pages of a list (fewer when it ends sooner). */
async function firstPages<T>(loadPage: (cursor: string | undefined) => Promise<ListPage<T>>, pages: number) {
  const data: T[] = [];
  let cursor: string | undefined;
  let read = 0;
  while (read < Math.max(1, pages)) {
    const page = await loadPage(cursor);
    read += 1;
    data.push(...(page.data ?? []));
    cursor = page.next_cursor ?? undefined;
    if (!cursor) break;
  }
  return { data, next_cursor: cursor ?? null, pages: read };
}

/**
 * A list the API pages: its first page on mount, then more() appends the next page while there is one. `data` has a
 * page's shape ({data, next_cursor}) with every row loaded so far. reload() (after an action on a row) reads again
 * as many pages as the list shows, so a row past the first page stays in view; a change of `deps` is another list
 * and starts over. A load superseded by a later one is dropped, and more() waits for the list's reload to land.
 */
export function usePagedLoad<T>(loadPage: (cursor: string | undefined) => Promise<ListPage<T>>, deps: unknown[] = []) {
  const [rows, setRows] = useState<LoadedPages<T> | undefined>();
  const [error, setError] = useState<unknown>();
  const [loadingMore, setLoadingMore] = useState(false);
  const [version, setVersion] = useState(0);
  const start = useRef(0);
  const pagesShown = useRef(1);
  const lastDeps = useRef<unknown[] | undefined>(undefined);
  const latestLoad = useRef(loadPage);
  latestLoad.current = loadPage;
  useEffect(() => {
    const mine = ++start.current;
    const sameList = lastDeps.current !== undefined && deps.every((d, i) => Object.is(d, lastDeps.current![i]));
    lastDeps.current = deps;
    setError(undefined);
    setLoadingMore(false);
    firstPages(loadPage, sameList ? pagesShown.current : 1).then(
      (loaded) => {
        if (mine !== start.current) return;
        pagesShown.current = loaded.pages;
        setRows({ ...loaded, start: mine });
      },
      (err) => mine === start.current && setError(err),
    );
  }, [...deps, version]);
  const more = useCallback(() => {
    if (!rows?.next_cursor || rows.start !== start.current || loadingMore) return;
    const mine = start.current;
    setError(undefined);
    setLoadingMore(true);
    latestLoad.current(rows.next_cursor).then(
      (page) => {
        if (mine !== start.current) return;
        pagesShown.current = rows.pages + 1;
        setRows({ ...rows, data: [...rows.data, ...(page.data ?? [])], next_cursor: page.next_cursor ?? null, pages: rows.pages + 1 });
        setLoadingMore(false);
      },
      (err) => {
        if (mine !== start.current) return;
        setError(err);
        setLoadingMore(false);
      },
    );
  }, [rows, loadingMore]);
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
  return { data: (await firstPages(loadPage, maxPages)).data };
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
