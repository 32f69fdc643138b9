// GDPR erasure requests: file one for a member or a former member (by user id), follow its status, cancel a
// pending one, retry a failed one, read the receipt of a completed one.
import { useState, type FormEvent } from 'react';
import { client, unwrap } from '../api/client';
import { useSession } from '../lib/session';
import { ErrorBox, Field, useAction, useLoad, When } from '../lib/ui';

export function ErasurePage() {
  const { can } = useSession();
  const requests = useLoad(() => unwrap(client.GET('/api/v1/governance/erasure-requests', { params: { query: { limit: 100 } } })));
  const members = useLoad(() =>
    can('governance:erase') ? unwrap(client.GET('/api/v1/members', { params: { query: { limit: 100 } } })) : Promise.resolve(undefined),
  );
  const [userId, setUserId] = useState('');
  const action = useAction();
  const fileRequest = (e: FormEvent) => {
    e.preventDefault();
    if (!window.confirm('Erase this person\'s name and e-mail from the organization? This cannot be undone once it ran.')) return;
    void action.run(async () => {
      await unwrap(client.POST('/api/v1/governance/erasure-requests', { body: { user_id: userId.trim() } }));
      setUserId('');
      requests.reload();
      members.reload();
    });
  };
  const step = (id: string, what: 'cancel' | 'retry') =>
    void action.run(async () => {
      const path = what === 'cancel' ? '/api/v1/governance/erasure-requests/{id}/cancel' : '/api/v1/governance/erasure-requests/{id}/retry';
      await unwrap(client.POST(path, { params: { path: { id } } }));
      requests.reload();
    });
  return (
    <main>
      <h1>Erasure requests</h1>
      <p>
        The worker replaces the person&apos;s name and e-mail with a pseudonym in every record of the organization,
        removes them if they are a member, and lists what it replaced. Audit entries stay, without the identifying text.
      </p>
      <ErrorBox error={requests.error ?? action.error} />
      {can('governance:erase') && (
        <form onSubmit={fileRequest} aria-label="File an erasure request">
          <Field label="User id of the person" name="user_id" value={userId} onChange={setUserId} required placeholder="usr_…" />
          {members.data?.data && (
            <p>
              Members:{' '}
              {members.data.data.map((m) => (
                <button key={m.user_id} type="button" className="link" onClick={() => setUserId(m.user_id!)}>
                  {m.name} ({m.role})
                </button>
              ))}
            </p>
          )}
          <button type="submit" disabled={action.busy}>File erasure request</button>
        </form>
      )}
      <table>
        <thead>
          <tr><th>Request</th><th>Person</th><th>Status</th><th>Pseudonym</th><th>Filed</th><th>Receipt</th><th /></tr>
        </thead>
        <tbody>
          {requests.data?.data?.map((r) => (
            <tr key={r.id} data-testid={`erasure-${r.id}`}>
              <td><code>{r.id}</code></td>
              <td><code>{r.user_id}</code></td>
              <td>{r.status}{r.error && <span className="error"> — {r.error}</span>}</td>
              <td>{r.pseudonym?.name}<br />{r.pseudonym?.email}</td>
              <td><When at={r.created_at} /></td>
              <td>
                {r.receipt ? (
                  <details>
                    <summary>
                      {r.receipt.replaced?.length ?? 0} columns{r.receipt.membership_removed ? ', member removed' : ''}
                      {r.receipt.account_erased ? ', account erased' : ''}
                    </summary>
                    <ul>
                      {r.receipt.replaced?.map((c) => (
                        <li key={`${c.table}.${c.column}`}>{c.table}.{c.column}: {c.rows} {c.rows === 1 ? 'row' : 'rows'}</li>
                      ))}
                    </ul>
                  </details>
                ) : '—'}
              </td>
              <td>
                {can('governance:erase') && r.status === 'pending' && <button type="button" onClick={() => step(r.id!, 'cancel')}>Cancel {r.id}</button>}
                {can('governance:erase') && r.status === 'failed' && <button type="button" onClick={() => step(r.id!, 'retry')}>Retry {r.id}</button>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </main>
  );
}
