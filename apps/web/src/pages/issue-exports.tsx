// Issue trackers (GitHub Issues, Jira): the targets page, and a finding's exports with the "Export" action used on
// the assessment page.
import { useState, type FormEvent } from 'react';
import { request } from '../api/client';
import type { operations } from '../api/schema';
import { useSession } from '../lib/session';
import { SudoErrorBox, SudoPrompt, useSudo } from '../lib/sudo';
import { ErrorBox, Field, loadAllPages, ShowMore, useAction, useLoad, usePagedLoad, When } from '../lib/ui';

type Json<T> = T extends { content: { 'application/json': infer J } } ? J : never;
type Target = Json<operations['getIssueExportTargetsId']['responses'][200]>;
type IssueExport = Json<operations['getFindingsIdIssueExports']['responses'][200]>['data'][number];
type Page<T> = { data: T[]; next_cursor: string | null };

const API = '/api/v1/issue-export-targets';

interface TargetForm {
  kind: 'github' | 'jira';
  name: string;
  baseUrl: string;
  repository: string;
  token: string;
  projectKey: string;
  issueType: string;
  email: string;
  apiToken: string;
}

const EMPTY: TargetForm = { kind: 'github', name: '', baseUrl: '', repository: '', token: '', projectKey: '', issueType: 'Bug', email: '', apiToken: '' };

/** The create body of the chosen tracker only; an empty GitHub base URL means github.com. */
function createBody(f: TargetForm): Record<string, unknown> {
  if (f.kind === 'github') {
    return { kind: 'github', name: f.name.trim(), repository: f.repository.trim(), token: f.token, ...(f.baseUrl.trim() && { base_url: f.baseUrl.trim() }) };
  }
  return { kind: 'jira', name: f.name.trim(), base_url: f.baseUrl.trim(), project_key: f.projectKey.trim(), issue_type: f.issueType.trim(), email: f.email.trim(), api_token: f.apiToken };
}

function CreateTargetForm({ onSaved }: { onSaved(): void }) {
  const [form, setForm] = useState<TargetForm>(EMPTY);
  const set = <K extends keyof TargetForm>(key: K) => (value: TargetForm[K]) => setForm((f) => ({ ...f, [key]: value }));
  const { busy, error, run } = useAction();
  // Creating one from a sign-in more than 10 minutes old: the API asks for the password (sudo mode).
  const sudo = useSudo();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      await sudo.send((proof) => request('POST', API, { ...createBody(form), ...proof }));
      setForm(EMPTY); // credentials are not kept after a save
      onSaved();
    });
  };
  return (
    <form onSubmit={submit} aria-label="Create issue tracker">
      <div className="field">
        <label htmlFor="tracker-kind">Tracker</label>
        <select id="tracker-kind" value={form.kind} onChange={(e) => set('kind')(e.target.value as TargetForm['kind'])}>
          <option value="github">GitHub Issues</option>
          <option value="jira">Jira</option>
        </select>
      </div>
      <Field label="Tracker name" name="tracker-name" value={form.name} onChange={set('name')} required />
      {form.kind === 'github' ? (
        <>
          <Field label="Repository (owner/repo)" name="repository" value={form.repository} onChange={set('repository')} required />
          <Field label="GitHub Enterprise API URL (empty for github.com)" name="base-url" value={form.baseUrl} onChange={set('baseUrl')} placeholder="https://github.example.com/api/v3" />
          <Field label="Token (issues: write)" name="token" type="password" value={form.token} onChange={set('token')} autoComplete="off" required />
        </>
      ) : (
        <>
          <Field label="Jira site URL" name="site-url" value={form.baseUrl} onChange={set('baseUrl')} placeholder="https://your-site.atlassian.net" required />
          <Field label="Project key" name="project-key" value={form.projectKey} onChange={set('projectKey')} required />
          <Field label="Issue type" name="issue-type" value={form.issueType} onChange={set('issueType')} required />
          <Field label="Account e-mail" name="jira-email" value={form.email} onChange={set('email')} required />
          <Field label="API token" name="api-token" type="password" value={form.apiToken} onChange={set('apiToken')} autoComplete="off" required />
        </>
      )}
      <SudoErrorBox error={error} />
      <SudoPrompt sudo={sudo} what="create this tracker" />
      <button type="submit" disabled={busy || (sudo.asked && !sudo.hasPassword)}>Create tracker</button>
    </form>
  );
}

function where(t: Target): string {
  return t.kind === 'github' ? `${t.repository} (${t.base_url})` : `${t.project_key} · ${t.issue_type} (${t.base_url})`;
}

export function IssueTrackersPage() {
  const { can } = useSession();
  const targets = usePagedLoad((cursor) => request<Page<Target>>('GET', `${API}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`));
  const { error, run } = useAction();
  return (
    <main>
      <h1>Issue trackers</h1>
      <p className="hint">GitHub repositories and Jira projects findings can be exported to. Tokens are never shown again.</p>
      <ErrorBox error={targets.error ?? error} />
      <table>
        <thead><tr><th>Name</th><th>Tracker</th><th>Where</th><th>Last success</th><th>Last error</th><th /></tr></thead>
        <tbody>
          {targets.data?.data.map((t) => (
            <tr key={t.id} data-testid={`tracker-${t.name}`}>
              <td>{t.name}</td>
              <td>{t.kind === 'github' ? 'GitHub Issues' : 'Jira'}</td>
              <td>{where(t)}</td>
              <td><When at={t.last_success_at} /></td>
              <td>{t.last_error ? <>{t.last_error} (<When at={t.last_error_at} />)</> : '—'}</td>
              <td>
                {can('issue_exports:configure') && (
                  <button type="button" onClick={() => void run(async () => {
                    if (!window.confirm(`Revoke ${t.name}? Its token is erased.`)) return;
                    await request('DELETE', `${API}/${t.id}`);
                    targets.reload();
                  })}>Revoke</button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <ShowMore list={targets} what="issue trackers" />
      {can('issue_exports:configure') && (
        <>
          <h2>New issue tracker</h2>
          <CreateTargetForm onSaved={targets.reload} />
        </>
      )}
      {!can('issue_exports:configure') && <p className="hint">Owners and admins configure issue trackers.</p>}
    </main>
  );
}

/**
 * A finding's issues, opened on demand (an assessment lists up to 100 findings: loading every finding's exports
 * up front would cost a request each).
 */
export function FindingIssues({ findingId }: { findingId: string }) {
  const [open, setOpen] = useState(false);
  if (!open) return <button type="button" onClick={() => setOpen(true)}>Issues</button>;
  return <FindingIssuesPanel findingId={findingId} />;
}

/** A finding's exports (key, link, status) and, for those who may, an export to a chosen tracker. */
function FindingIssuesPanel({ findingId }: { findingId: string }) {
  const { can } = useSession();
  const exports = useLoad(() => request<{ data: IssueExport[] }>('GET', `/api/v1/findings/${findingId}/issue-exports`), [findingId]);
  const mayExport = can('findings:export_issue') && can('issue_exports:read');
  // Every tracker (all pages) for the picker.
  const targets = useLoad(
    () => (mayExport ? loadAllPages((cursor) => request<Page<Target>>('GET', `${API}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)) : Promise.resolve({ data: [] as Target[] })),
    [mayExport],
  );
  const [targetId, setTargetId] = useState('');
  const { busy, error, run } = useAction();
  const exportNow = () =>
    void run(async () => {
      await request('POST', `/api/v1/findings/${findingId}/issue-exports`, { target_id: targetId || targets.data?.data[0]?.id });
      exports.reload();
      // The worker creates the issue in the background: look again shortly.
      setTimeout(exports.reload, 1500);
    });
  return (
    <div className="finding-issues">
      {exports.data?.data.map((e) => (
        <div key={e.id} data-testid={`export-${e.target_name}`}>
          {e.target_name}: {e.external_url ? <a href={e.external_url} target="_blank" rel="noreferrer">{e.external_key}</a> : null}{' '}
          <span className={`badge status-${e.status}`}>{e.status}</span>
          {e.status !== 'succeeded' && e.last_error && <span className="error"> {e.last_error}</span>}
        </div>
      ))}
      {mayExport && (targets.data?.data.length ?? 0) > 0 && (
        <span>
          <select aria-label="Issue tracker" value={targetId} onChange={(e) => setTargetId(e.target.value)}>
            {targets.data?.data.map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
          </select>
          <button type="button" disabled={busy} onClick={exportNow}>Export issue</button>
        </span>
      )}
      {exports.data?.data.length === 0 && !mayExport && <span>Not exported.</span>}
      <ErrorBox error={exports.error ?? error} />
    </div>
  );
}
