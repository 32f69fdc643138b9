// GDPR erasure requests: find the person by name or e-mail among the organization's people (members, former
// members, invitees, share grantees, notification recipients), file a request, read the preview the worker writes
// (what would change, per table and column, with masked excerpts), then confirm or cancel; follow the erasure and
// read its receipt. Nothing changes before the confirmation.
import { useEffect, useState, type FormEvent } from 'react';
import { client, unwrap } from '../api/client';
import type { operations } from '../api/schema';
import { useSession } from '../lib/session';
import { ErrorBox, Field, ShowMore, useAction, usePagedLoad, When } from '../lib/ui';

type Json<T> = T extends { content: { 'application/json': infer J } } ? J : never;
type Candidate = NonNullable<Json<operations['getGovernanceErasureCandidates']['responses'][200]>['data']>[number];
type ErasureRequest = Json<operations['getGovernanceErasureRequestsId']['responses'][200]>;

const KIND_LABELS: Record<string, string> = {
  member: 'member',
  former_member: 'former member',
  invitee: 'invitee, no account',
  share_grantee: 'report share grantee, no account',
  recipient: 'notification recipient, no account',
};

const STATUS_LABELS: Record<string, string> = {
  previewing: 'preparing the preview',
  awaiting_confirmation: 'awaiting confirmation',
  erasing: 'erasing',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
};

const candidateLabel = (c: Candidate) => `${c.name ? `${c.name} ` : ''}<${c.email}> (${KIND_LABELS[c.kind ?? ''] ?? c.kind}${c.role ? `, ${c.role}` : ''})`;

function PersonPicker({ onFiled }: { onFiled(): void }) {
  const [query, setQuery] = useState('');
  const [found, setFound] = useState<Candidate[] | null>(null);
  const [picked, setPicked] = useState<Candidate | null>(null);
  const action = useAction();
  const search = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      const res = await unwrap(client.GET('/api/v1/governance/erasure-candidates', { params: { query: { q: query.trim() } } }));
      setFound(res.data ?? []);
      setPicked(null);
    });
  };
  const file = () =>
    void action.run(async () => {
      const body = picked!.user_id ? { user_id: picked!.user_id } : { email: picked!.email! };
      await unwrap(client.POST('/api/v1/governance/erasure-requests', { body }));
      setPicked(null);
      setFound(null);
      setQuery('');
      onFiled();
    });
  return (
    <section aria-label="Find the person">
      <h2>Find the person</h2>
      <ErrorBox error={action.error} />
      <form onSubmit={search} aria-label="Search people">
        <Field label="Name or e-mail" name="q" value={query} onChange={setQuery} required placeholder="at least 2 characters" />
        <button type="submit" disabled={action.busy}>Search</button>
      </form>
      {found && found.length === 0 && <p>Nobody of the organization matches.</p>}
      {found && found.length > 0 && (
        <ul aria-label="People found">
          {found.map((c) => (
            <li key={`${c.user_id ?? ''}${c.email}`}>
              <button type="button" className="link" disabled={c.role === 'owner'} onClick={() => setPicked(c)}>
                {candidateLabel(c)}
              </button>
              {c.role === 'owner' && ' — the owner cannot be erased; transfer ownership first'}
            </li>
          ))}
        </ul>
      )}
      {picked && (
        <p>
          Selected: <strong>{candidateLabel(picked)}</strong>{' '}
          <button type="button" onClick={file} disabled={action.busy}>Preview the erasure</button>
        </p>
      )}
    </section>
  );
}

function PreviewDetails({ request, canErase, onDone }: { request: ErasureRequest; canErase: boolean; onDone(): void }) {
  const action = useAction();
  const preview = request.preview;
  const confirm = () => {
    if (!window.confirm('Erase this person now? The changes listed in the preview cannot be undone.')) return;
    void action.run(async () => {
      await unwrap(client.POST('/api/v1/governance/erasure-requests/{id}/confirm', { params: { path: { id: request.id! } } }));
      onDone();
    });
  };
  if (!preview) return null;
  return (
    <div data-testid={`preview-${request.id}`}>
      <ErrorBox error={action.error} />
      <p>
        Preview: {preview.membership ? 'removes the membership; ' : ''}
        {preview.account ? 'erases the account (no other organization); ' : ''}
        {preview.audit_entries} audit entries lose IP and user agent; {preview.reports} report PDFs regenerated;{' '}
        {preview.name_searched ? 'the name and the e-mail are searched in free text.' : 'only the exact e-mail is searched in free text (the name is not a full name).'}
      </p>
      <ul>
        {preview.columns?.map((c) => (
          <li key={`${c.table}.${c.column}`}>
            {c.table}.{c.column}: {c.rows} {c.rows === 1 ? 'row' : 'rows'}
            {c.samples && c.samples.length > 0 && (
              <ul>
                {c.samples.map((s) => (
                  <li key={s.id}><code>{s.excerpt}</code></li>
                ))}
              </ul>
            )}
          </li>
        ))}
      </ul>
      {canErase && request.status === 'awaiting_confirmation' && (
        <button type="button" onClick={confirm} disabled={action.busy}>Confirm erasure {request.id}</button>
      )}
    </div>
  );
}

export function ErasurePage() {
  const { can } = useSession();
  // The first 100 requests, then Show more; a reload (the 2 s follow below, an action) reads as many pages as shown.
  const requests = usePagedLoad((cursor) => unwrap(client.GET('/api/v1/governance/erasure-requests', { params: { query: { limit: 100, cursor } } })));
  const action = useAction();
  const working = requests.data?.data?.some((r) => r.status === 'previewing' || r.status === 'erasing') ?? false;
  useEffect(() => {
    if (!working) return;
    // The worker writes the preview and the receipt: the page follows until it has.
    const timer = setInterval(() => requests.reload(), 2000);
    return () => clearInterval(timer);
  }, [working]); // eslint-disable-line react-hooks/exhaustive-deps
  const step = (id: string, what: 'cancel' | 'retry') =>
    void action.run(async () => {
      const path = what === 'cancel' ? '/api/v1/governance/erasure-requests/{id}/cancel' : '/api/v1/governance/erasure-requests/{id}/retry';
      await unwrap(client.POST(path, { params: { path: { id } } }));
      requests.reload();
    });
  const canErase = can('governance:erase');
  return (
    <main>
      <h1>Erasure requests</h1>
      <p>
        An erasure replaces the person&apos;s e-mail (and their name, when it is a full name) with a pseudonym in this
        organization&apos;s records only, removes them if they are a member, and erases their account when they belong
        to no other organization. You see a preview first; nothing changes until an owner or admin confirms.
      </p>
      <ErrorBox error={requests.error ?? action.error} />
      {canErase && <PersonPicker onFiled={() => requests.reload()} />}
      <table>
        <thead>
          <tr><th>Request</th><th>Person</th><th>Status</th><th>Pseudonym</th><th>Filed</th><th /></tr>
        </thead>
        {requests.data?.data?.map((r) => (
          // One body per request: its row, then its preview or receipt across the table.
          <tbody key={r.id} data-testid={`erasure-${r.id}`}>
            <tr>
              <td><code>{r.id}</code></td>
              <td>{r.user_id ? <span title={r.user_id}>account</span> : 'by e-mail'}</td>
              <td>{STATUS_LABELS[r.status ?? ''] ?? r.status}{r.error && <span className="error"> — {r.error}</span>}</td>
              <td>{r.pseudonym?.name}<br />{r.pseudonym?.email}</td>
              <td><When at={r.created_at} /></td>
              <td>
                {canErase && (r.status === 'previewing' || r.status === 'awaiting_confirmation') && (
                  <button type="button" onClick={() => step(r.id!, 'cancel')}>Cancel {r.id}</button>
                )}
                {canErase && r.status === 'failed' && <button type="button" onClick={() => step(r.id!, 'retry')}>Retry {r.id}</button>}
              </td>
            </tr>
            {(r.status === 'awaiting_confirmation' || r.receipt) && (
              <tr>
                <td colSpan={6}>
                  {r.status === 'awaiting_confirmation' && <PreviewDetails request={r} canErase={canErase} onDone={() => requests.reload()} />}
                  {r.receipt && (
                    <details>
                      <summary>
                        Receipt: {r.receipt.replaced?.length ?? 0} columns{r.receipt.membership_removed ? ', member removed' : ''}
                        {r.receipt.account_erased ? ', account erased' : ''}
                        {r.receipt.reports_regenerated?.length ? `, ${r.receipt.reports_regenerated.length} reports regenerated` : ''}
                      </summary>
                      <ul>
                        {r.receipt.replaced?.map((c) => (
                          <li key={`${c.table}.${c.column}`}>{c.table}.{c.column}: {c.rows} {c.rows === 1 ? 'row' : 'rows'}</li>
                        ))}
                      </ul>
                    </details>
                  )}
                </td>
              </tr>
            )}
          </tbody>
        ))}
      </table>
      <ShowMore list={requests} what="erasure requests" />
    </main>
  );
}
