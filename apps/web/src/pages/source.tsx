// Source: a project's repository or archive, an assessment's zipped source (upload with progress, download) and
// the artifacts browser (extracted files, one file's text or a download).
import { useEffect, useState, type FormEvent } from 'react';
import { client, csrfToken, unwrap, ApiError } from '../api/client';
import { useSession } from '../lib/session';
import { ErrorBox, Field, useAction, useLoad, When } from '../lib/ui';

export interface ProjectSource {
  type: 'repository' | 'archive';
  repository_url: string | null;
  default_branch: string | null;
  archive: { id: string; assessment_id: string; sha256: string } | null;
  updated_at: string;
}

const ACCEPTS_SOURCE = ['draft', 'queued'];

export function ProjectSourceSection({ projectId, source, onChange }: { projectId: string; source: ProjectSource | null | undefined; onChange(): void }) {
  const { can } = useSession();
  const [url, setUrl] = useState('');
  const [branch, setBranch] = useState('main');
  const action = useAction();
  const attach = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      await unwrap(client.PUT('/api/v1/projects/{id}/source', { params: { path: { id: projectId } }, body: { type: 'repository', url, default_branch: branch } }));
      setUrl('');
      onChange();
    });
  };
  const remove = () => {
    if (!window.confirm('Remove the project source?')) return;
    void action.run(async () => {
      await unwrap(client.DELETE('/api/v1/projects/{id}/source', { params: { path: { id: projectId } } }));
      onChange();
    });
  };
  return (
    <section aria-label="Project source">
      <h2>Source</h2>
      {!source && <p>No source attached.</p>}
      {source?.type === 'repository' && (
        <p data-testid="project-source">
          Repository <code>{source.repository_url}</code>, branch <code>{source.default_branch}</code>
        </p>
      )}
      {source?.type === 'archive' && source.archive && (
        <p data-testid="project-source">
          Archive <code>{source.archive.sha256.slice(0, 12)}</code> uploaded to{' '}
          <a href={`/assessments/${source.archive.assessment_id}`}>an assessment</a>
        </p>
      )}
      <ErrorBox error={action.error} />
      {can('projects:manage_source') && (
        <>
          <form onSubmit={attach} className="inline" aria-label="Attach repository">
            <Field label="Clone URL (https)" name="url" value={url} onChange={setUrl} placeholder="https://github.com/acme/shop.git" required />
            <Field label="Default branch" name="branch" value={branch} onChange={setBranch} required />
            <button type="submit" disabled={action.busy}>{source ? 'Change source' : 'Attach repository'}</button>
          </form>
          {source && <button type="button" onClick={remove} disabled={action.busy}>Remove source</button>}
        </>
      )}
    </section>
  );
}

/** POST the zip with XMLHttpRequest: fetch cannot report upload progress. */
function uploadZip(assessmentId: string, file: File, onProgress: (fraction: number) => void): Promise<{ sha256: string; duplicate: boolean }> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `/api/v1/assessments/${encodeURIComponent(assessmentId)}/source`);
    xhr.setRequestHeader('Content-Type', 'application/zip');
    const token = csrfToken();
    if (token) xhr.setRequestHeader('X-CSRF-Token', token);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.onload = () => {
      let body: { detail?: string; sha256?: string; duplicate?: boolean } = {};
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        /* not JSON */
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body as { sha256: string; duplicate: boolean });
      else reject(new ApiError(xhr.status, body.detail ?? `${xhr.status} ${xhr.statusText}`));
    };
    xhr.onerror = () => reject(new Error('The upload failed (connection closed).'));
    xhr.send(file);
  });
}

export function AssessmentSourceSection({ assessmentId, status, projectId }: { assessmentId: string; status?: string; projectId?: string }) {
  const { can } = useSession();
  const readable = can('source:read_artifacts');
  const archive = useLoad(
    () =>
      readable
        ? unwrap(client.GET('/api/v1/assessments/{id}/source', { params: { path: { id: assessmentId } } })).catch((err) => {
            if (err instanceof ApiError && err.status === 404) return null;
            throw err;
          })
        : Promise.resolve(null),
    [assessmentId, readable],
  );
  const usage = useLoad(
    () => (readable ? unwrap(client.GET('/api/v1/organization/source-usage')) : Promise.resolve(null)),
    [readable],
  );
  const [file, setFile] = useState<File | null>(null);
  const [progress, setProgress] = useState<number | null>(null);
  const [notice, setNotice] = useState('');
  const action = useAction();
  const upload = (e: FormEvent) => {
    e.preventDefault();
    if (!file) return;
    setNotice('');
    void action.run(async () => {
      setProgress(0);
      try {
        const stored = await uploadZip(assessmentId, file, setProgress);
        setNotice(stored.duplicate ? 'This archive was already uploaded: nothing changed.' : `Uploaded: SHA-256 ${stored.sha256}`);
        archive.reload();
        usage.reload();
      } finally {
        setProgress(null);
      }
    });
  };
  const useAsProjectSource = () =>
    void action.run(async () => {
      await unwrap(client.PUT('/api/v1/projects/{id}/source', { params: { path: { id: projectId! } }, body: { type: 'archive', archive_id: archive.data!.id } }));
      setNotice('The project now uses this archive as its source.');
    });
  const a = archive.data;
  return (
    <section aria-label="Source">
      <h2>Source</h2>
      <ErrorBox error={archive.error} />
      {a && (
        <dl className="facts" data-testid="source-archive">
          <dt>SHA-256</dt><dd><code>{a.sha256}</code></dd>
          <dt>Files</dt><dd>{a.file_count} ({a.uncompressed_bytes} bytes; archive {a.size_bytes} bytes)</dd>
          <dt>Uploaded</dt><dd><When at={a.created_at} /></dd>
        </dl>
      )}
      {readable && a === null && <p>No source uploaded.</p>}
      {a && can('source:download_archive') && (
        <p><a href={`/api/v1/assessments/${assessmentId}/source/archive`} download>Download original archive</a></p>
      )}
      {a && projectId && can('projects:manage_source') && (
        <button type="button" onClick={useAsProjectSource} disabled={action.busy}>Use as project source</button>
      )}
      {can('source:upload_zip') && status && ACCEPTS_SOURCE.includes(status) && (
        <form onSubmit={upload} className="inline" aria-label="Upload source">
          <div className="field">
            <label htmlFor="source-zip">Zipped source</label>
            <input id="source-zip" type="file" accept=".zip,application/zip" onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
          </div>
          <button type="submit" disabled={!file || action.busy}>Upload</button>
          {progress !== null && <progress aria-label="Upload progress" max={1} value={progress} />}
        </form>
      )}
      {notice && <p role="status">{notice}</p>}
      <ErrorBox error={action.error} />
      {usage.data && (
        <p data-testid="source-usage">
          Organization source storage: {formatBytes(usage.data.used_bytes)} of {formatBytes(usage.data.quota_bytes)} used
        </p>
      )}
      {a && readable && <ArtifactsBrowser assessmentId={assessmentId} archiveId={a.id} />}
    </section>
  );
}

/** Bytes for people: 1.5 MiB, 10 GiB. */
export function formatBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} bytes` : `${Number(value.toFixed(1))} ${units[unit]}`;
}

type SourceFile = { path: string; size_bytes: number; sha256: string };

function ArtifactsBrowser({ assessmentId, archiveId }: { assessmentId: string; archiveId: string }) {
  const [files, setFiles] = useState<SourceFile[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [prefix, setPrefix] = useState('');
  const [open, setOpen] = useState<{ path: string; text?: string; download?: string } | null>(null);
  const action = useAction();
  const load = (next: string | null, reset: boolean) =>
    void action.run(async () => {
      const page = await unwrap(
        client.GET('/api/v1/assessments/{id}/source/files', {
          params: { path: { id: assessmentId }, query: { limit: 50, ...(next ? { cursor: next } : {}), ...(prefix ? { prefix } : {}) } },
        }),
      );
      setFiles((current) => (reset ? page.data! : [...current, ...page.data!]) as SourceFile[]);
      setCursor(page.next_cursor ?? null);
    });
  useEffect(() => load(null, true), [assessmentId, archiveId]);
  const filter = (e: FormEvent) => {
    e.preventDefault();
    load(null, true);
  };
  const show = (path: string) =>
    void action.run(async () => {
      const url = `/api/v1/assessments/${encodeURIComponent(assessmentId)}/source/file?path=${encodeURIComponent(path)}`;
      const res = await fetch(url, { credentials: 'same-origin' });
      if (!res.ok) throw new ApiError(res.status, ((await res.json().catch(() => ({}))) as { detail?: string }).detail ?? res.statusText);
      if ((res.headers.get('content-type') ?? '').startsWith('text/plain')) setOpen({ path, text: await res.text() });
      else setOpen({ path, download: url });
    });
  return (
    <section aria-label="Artifacts">
      <h3>Artifacts</h3>
      <ErrorBox error={action.error} />
      <form onSubmit={filter} className="inline" aria-label="Filter files">
        <Field label="Folder or path prefix" name="prefix" value={prefix} onChange={setPrefix} placeholder="src/" />
        <button type="submit">Filter</button>
      </form>
      <table>
        <thead><tr><th>Path</th><th>Size</th><th>SHA-256</th></tr></thead>
        <tbody>
          {files.map((f) => (
            <tr key={f.path}>
              <td><button type="button" className="link" onClick={() => show(f.path)}>{f.path}</button></td>
              <td>{f.size_bytes}</td>
              <td><code title={f.sha256}>{f.sha256.slice(0, 12)}</code></td>
            </tr>
          ))}
        </tbody>
      </table>
      {cursor && <button type="button" onClick={() => load(cursor, false)} disabled={action.busy}>More files</button>}
      {open && (
        <article aria-label={`File ${open.path}`}>
          <h4>{open.path}</h4>
          {open.text !== undefined && <pre data-testid="file-text">{open.text}</pre>}
          {open.download && <p>Binary or large file: <a href={open.download} download>Download {open.path}</a></p>}
        </article>
      )}
    </section>
  );
}
