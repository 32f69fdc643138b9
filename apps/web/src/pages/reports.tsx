// Reports: an assessment's reports, one report with its publish / share / revoke controls, and the public page a
// share's holder opens signed out (/shared/reports/<token>). Publishing and sharing from a sign-in more than 10
// minutes old ask for the password (lib/sudo.tsx); unpublishing and revoking never do.
import { useState, type FormEvent } from 'react';
import { Link, useParams } from 'react-router-dom';
import { ApiError, client, unwrap } from '../api/client';
import { useSession } from '../lib/session';
import { SudoErrorBox, SudoPrompt, useSudo } from '../lib/sudo';
import { ErrorBox, Field, loadAllPages, OnceSecret, ShowMore, useAction, useLoad, usePagedLoad, When } from '../lib/ui';

/** A date input's value (end of that day, local time) as an ISO timestamp; empty: none. */
function endOfDay(date: string): string | undefined {
  return date ? new Date(`${date}T23:59:59`).toISOString() : undefined;
}

function formatSize(bytes?: number | null): string {
  if (bytes == null) return '—';
  return bytes < 1024 * 1024 ? `${Math.max(1, Math.round(bytes / 1024))} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** The reports of one assessment, on its page; generating one needs reports:generate. */
export function AssessmentReports({ assessmentId }: { assessmentId: string }) {
  const { can } = useSession();
  const reports = usePagedLoad(
    (cursor) => unwrap(client.GET('/api/v1/reports', { params: { query: { limit: 100, assessment_id: assessmentId, cursor } } })),
    [assessmentId],
  );
  const action = useAction();
  const generate = () =>
    void action.run(async () => {
      await unwrap(client.POST('/api/v1/assessments/{id}/reports', { params: { path: { id: assessmentId } }, body: {} }));
      reports.reload();
    });
  return (
    <section aria-label="Reports">
      <h2>Reports</h2>
      <ErrorBox error={reports.error ?? action.error} />
      <ul>
        {reports.data?.data?.map((r) => (
          <li key={r.id}>
            <Link to={`/reports/${r.id}`}>{r.title}</Link> <span className="badge">{r.status}</span>
          </li>
        ))}
      </ul>
      <ShowMore list={reports} what="reports" />
      {reports.data?.data?.length === 0 && <p>No reports yet.</p>}
      {can('reports:generate') && <button type="button" disabled={action.busy} onClick={generate}>Generate report</button>}
    </section>
  );
}

function PublishControls({ reportId, published, canUnpublish, onChange }: { reportId: string; published: boolean; canUnpublish: boolean; onChange(): void }) {
  const [expires, setExpires] = useState('');
  const [url, setUrl] = useState<string>();
  const action = useAction();
  const sudo = useSudo();
  const publish = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      const expiresAt = endOfDay(expires);
      const body = expiresAt ? { expires_at: expiresAt } : {};
      const res = await sudo.send((proof) =>
        unwrap(client.POST('/api/v1/reports/{id}/publication', { params: { path: { id: reportId } }, body: { ...body, ...proof } })),
      );
      setUrl(res.url);
      onChange();
    });
  };
  const unpublish = () => {
    if (!window.confirm('Unpublish the report? Its URL stops working at once.')) return;
    void action.run(async () => {
      await unwrap(client.DELETE('/api/v1/reports/{id}/publication', { params: { path: { id: reportId } } }));
      setUrl(undefined);
      onChange();
    });
  };
  return (
    <section aria-label="Publication">
      <h3>Publish to a URL</h3>
      <p className="hint">Anyone holding the URL can read this report and download its PDF, signed out. Publishing again replaces the URL (that revokes the old one: it needs the right to revoke external access too).</p>
      <SudoErrorBox error={action.error} />
      {url && (
        <OnceSecret label="Published URL" value={url}>
          <p><a href={url} target="_blank" rel="noreferrer">Open the published page</a></p>
        </OnceSecret>
      )}
      <form className="inline" onSubmit={publish} aria-label="Publish the report">
        <div className="field">
          <label htmlFor="publish-expires">Link expires (optional)</label>
          <input id="publish-expires" type="date" value={expires} onChange={(e) => setExpires(e.target.value)} />
        </div>
        <SudoPrompt sudo={sudo} what={published ? 'publish the report to a new URL' : 'publish the report'} />
        {(!published || canUnpublish) && (
          <button type="submit" disabled={action.busy || (sudo.asked && !sudo.hasPassword)}>{published ? 'Publish again (new URL)' : 'Publish'}</button>
        )}
        {published && canUnpublish && <button type="button" disabled={action.busy} onClick={unpublish}>Unpublish</button>}
      </form>
    </section>
  );
}

function ShareForm({ reportId, onChange }: { reportId: string; onChange(): void }) {
  const [email, setEmail] = useState('');
  const [expires, setExpires] = useState('');
  const [sent, setSent] = useState<string>();
  const action = useAction();
  const sudo = useSudo();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      const expiresAt = endOfDay(expires);
      const body = { email, ...(expiresAt ? { expires_at: expiresAt } : {}) };
      await sudo.send((proof) => unwrap(client.POST('/api/v1/reports/{id}/shares', { params: { path: { id: reportId } }, body: { ...body, ...proof } })));
      setSent(email);
      setEmail('');
      onChange();
    });
  };
  return (
    <section aria-label="Share by e-mail">
      <h3>Share with one person</h3>
      <SudoErrorBox error={action.error} />
      {sent && <p className="ok" role="status">A link to the report was mailed to {sent}.</p>}
      <form className="inline" onSubmit={submit} aria-label="Share the report by e-mail">
        <Field label="E-mail to share with" name="share-email" type="email" value={email} onChange={setEmail} required />
        <div className="field">
          <label htmlFor="share-expires">Access expires (default: 30 days)</label>
          <input id="share-expires" type="date" value={expires} onChange={(e) => setExpires(e.target.value)} />
        </div>
        <SudoPrompt sudo={sudo} what={`share the report with ${email || 'this address'}`} />
        <button type="submit" disabled={action.busy || (sudo.asked && !sudo.hasPassword)}>Share</button>
      </form>
    </section>
  );
}

/** One report: its facts, the PDF, and (by scope) publishing, sharing and the list of grants with revocation. */
export function ReportPage() {
  const { id = '' } = useParams();
  const { can } = useSession();
  const report = useLoad(() => unwrap(client.GET('/api/v1/reports/{id}', { params: { path: { id } } })), [id]);
  const shares = usePagedLoad(
    (cursor) => unwrap(client.GET('/api/v1/reports/{id}/shares', { params: { path: { id }, query: { limit: 100, cursor } } })),
    [id],
  );
  // Whether the report is published: its live link may be on any page of the list, so every active share is read.
  const active = useLoad(
    () => loadAllPages((cursor) => unwrap(client.GET('/api/v1/reports/{id}/shares', { params: { path: { id }, query: { limit: 100, status: 'active', cursor } } }))),
    [id],
  );
  const reloadShares = () => {
    shares.reload();
    active.reload();
  };
  const action = useAction();
  const revoke = (shareId: string, who: string) => {
    if (!window.confirm(`Revoke the access of ${who}?`)) return;
    void action.run(async () => {
      await unwrap(client.DELETE('/api/v1/reports/{id}/shares/{share_id}', { params: { path: { id, share_id: shareId } } }));
      reloadShares();
    });
  };
  const r = report.data;
  const ready = r?.status === 'ready';
  const published = !!active.data?.data.some((s) => s.kind === 'link');
  return (
    <main>
      <h1>Report {r?.title}</h1>
      <ErrorBox error={report.error} />
      {r && (
        <dl>
          <dt>Status</dt><dd><span className="badge">{r.status}</span></dd>
          <dt>Assessment</dt><dd><Link to={`/assessments/${r.assessment_id}`}>{r.assessment_id}</Link></dd>
          <dt>Generated</dt><dd><When at={r.ready_at} /></dd>
          <dt>Size</dt><dd>{formatSize(r.size_bytes)}</dd>
        </dl>
      )}
      {ready && can('reports:download') && <p><a className="button" href={`/api/v1/reports/${id}/download`}>Download PDF</a></p>}
      {ready && can('reports:publish') && <PublishControls reportId={id} published={published} canUnpublish={can('reports:revoke_share')} onChange={reloadShares} />}
      {ready && can('reports:share') && <ShareForm reportId={id} onChange={reloadShares} />}
      {r && !ready && <p className="hint">The report can be published or shared once it is ready.</p>}
      <h2>External access</h2>
      <ErrorBox error={shares.error ?? action.error} />
      <table aria-label="External access">
        <thead><tr><th>Who</th><th>Status</th><th>Expires</th><th>Views and downloads</th><th>Last used</th><th></th></tr></thead>
        <tbody>
          {shares.data?.data?.map((s) => {
            const who = s.kind === 'link' ? 'Published URL' : s.email ?? '';
            return (
              <tr key={s.id}>
                <td>{who}</td>
                <td><span className={`badge status-${s.status}`}>{s.status}</span></td>
                <td><When at={s.expires_at} /></td>
                <td>{s.access_count}</td>
                <td><When at={s.last_accessed_at} /></td>
                <td>
                  {s.status === 'active' && can('reports:revoke_share') && (
                    <button type="button" onClick={() => revoke(s.id!, who)}>Revoke {who}</button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <ShowMore list={shares} what="grants" />
      {shares.data?.data?.length === 0 && <p>Nobody outside the organization has access.</p>}
    </main>
  );
}

/** The page a published URL or a mailed link opens: no session needed. */
export function SharedReportPage() {
  const { token = '' } = useParams();
  const shared = useLoad(() => unwrap(client.GET('/api/v1/shared/reports/{token}', { params: { path: { token } } }), { quiet401: true }), [token]);
  const error = shared.error;
  const s = shared.data;
  return (
    <main className="narrow">
      {error instanceof ApiError && error.status === 404 ? (
        <>
          <h1>Report not available</h1>
          <p role="alert" className="error">This link is invalid, has expired or was revoked. Ask the sender for a new one.</p>
        </>
      ) : (
        <ErrorBox error={error} />
      )}
      {s && (
        <>
          <h1>{s.title}</h1>
          <p>Shared by {s.organization_name}.</p>
          <dl>
            <dt>Project</dt><dd>{s.project_name}</dd>
            <dt>Assessment</dt><dd>{s.assessment_name}</dd>
            <dt>Generated</dt><dd><When at={s.ready_at} /></dd>
            <dt>Size</dt><dd>{formatSize(s.size_bytes)}</dd>
            <dt>Link expires</dt><dd>{s.expires_at ? <When at={s.expires_at} /> : 'never'}</dd>
          </dl>
          <p><a className="button" href={s.download_path} download>Download PDF</a></p>
          <p className="hint">Views and downloads of this page are recorded by {s.organization_name}.</p>
        </>
      )}
    </main>
  );
}
