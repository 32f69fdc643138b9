// Webhooks at any of the three levels. One set of components, parameterised by the level's API base
// (/api/v1/webhooks, /api/v1/projects/{id}/webhooks, /api/v1/assessments/{id}/webhooks) and its page base.
import { useState, type FormEvent } from 'react';
import { Link, useLocation, useParams } from 'react-router-dom';
import { request } from '../api/client';
import { useSession } from '../lib/session';
import { ErrorBox, Field, OnceSecret, useAction, useLoad, When } from '../lib/ui';

interface Subscription {
  id: string;
  name: string;
  url: string;
  events: string[];
  active: boolean;
  status: 'active' | 'failing' | 'disabled';
  severity_filter: string[] | null;
  status_filter: string[] | null;
  payload_format: string;
  splunk_index: string | null;
  has_authorization: boolean;
  previous_secret_expires_at: string | null;
  disabled_reason: string | null;
  created_at: string;
  secret?: string;
}
type Page<T> = { data: T[]; next_cursor: string | null };

interface Level {
  title: string;
  api: string;
  page: string;
}

export function useLevel(): Level {
  const { projectId, assessmentId } = useParams();
  if (projectId) return { title: 'Project webhooks', api: `/api/v1/projects/${projectId}/webhooks`, page: `/projects/${projectId}/webhooks` };
  if (assessmentId)
    return { title: 'Assessment webhooks', api: `/api/v1/assessments/${assessmentId}/webhooks`, page: `/assessments/${assessmentId}/webhooks` };
  return { title: 'Organization webhooks', api: '/api/v1/webhooks', page: '/webhooks' };
}

const FORMATS = ['service', 'splunk_hec', 'microsoft_sentinel', 'cef'];
const SEVERITIES = ['critical', 'high', 'medium', 'low', 'info'];

function splitList(text: string): string[] | null {
  const items = text.split(',').map((s) => s.trim()).filter(Boolean);
  return items.length ? items : null;
}

function SubscriptionForm({ level, initial, onSaved }: { level: Level; initial?: Subscription; onSaved(sub: Subscription): void }) {
  const events = useLoad(() => request<Page<{ type: string; description: string }>>('GET', `${level.api}/events`), [level.api]);
  const [name, setName] = useState(initial?.name ?? '');
  const [url, setUrl] = useState(initial?.url ?? '');
  const [picked, setPicked] = useState<Set<string>>(new Set(initial?.events ?? []));
  const [format, setFormat] = useState(initial?.payload_format ?? 'service');
  const [severity, setSeverity] = useState((initial?.severity_filter ?? []).join(', '));
  const [status, setStatus] = useState((initial?.status_filter ?? []).join(', '));
  const [splunkIndex, setSplunkIndex] = useState(initial?.splunk_index ?? '');
  const [authorization, setAuthorization] = useState('');
  const { busy, error, run } = useAction();
  const toggle = (type: string) => {
    const next = new Set(picked);
    if (next.has(type)) next.delete(type);
    else next.add(type);
    setPicked(next);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const body: Record<string, unknown> = {
        name,
        url,
        events: [...picked],
        payload_format: format,
        severity_filter: splitList(severity),
        status_filter: splitList(status),
        splunk_index: splunkIndex || null,
      };
      if (authorization) body.authorization = authorization;
      const saved = initial?.id
        ? await request<Subscription>('PATCH', `${level.api}/subscriptions/${initial.id}`, body)
        : await request<Subscription>('POST', `${level.api}/subscriptions`, body);
      onSaved(saved);
    });
  };
  return (
    <form onSubmit={submit} aria-label={initial ? 'Edit subscription' : 'Create subscription'}>
      <Field label="Subscription name" name="sub-name" value={name} onChange={setName} required />
      <Field label="Endpoint URL (https)" name="url" type="url" value={url} onChange={setUrl} required />
      <fieldset>
        <legend>Events</legend>
        <ErrorBox error={events.error} />
        {events.data?.data.map((ev) => (
          <label key={ev.type} className="check" title={ev.description}>
            <input type="checkbox" checked={picked.has(ev.type)} onChange={() => toggle(ev.type)} /> {ev.type}
          </label>
        ))}
      </fieldset>
      <div className="field">
        <label htmlFor="payload-format">Payload format</label>
        <select id="payload-format" value={format} onChange={(e) => setFormat(e.target.value)}>
          {FORMATS.map((f) => <option key={f}>{f}</option>)}
        </select>
      </div>
      <Field label={`Severity filter (comma-separated: ${SEVERITIES.join(', ')})`} name="severity" value={severity} onChange={setSeverity} />
      <Field label="Status filter (comma-separated)" name="status" value={status} onChange={setStatus} />
      {format === 'splunk_hec' && <Field label="Splunk index" name="splunk-index" value={splunkIndex} onChange={setSplunkIndex} />}
      <Field
        label={initial?.has_authorization ? 'Authorization header (set; type to replace)' : 'Authorization header (optional)'}
        name="authorization"
        type="password"
        value={authorization}
        onChange={setAuthorization}
        autoComplete="off"
      />
      <ErrorBox error={error} />
      <button type="submit" disabled={busy || picked.size === 0}>{initial ? 'Save' : 'Create subscription'}</button>
    </form>
  );
}

function statusText(sub: Subscription): string {
  return sub.status === 'disabled' && sub.disabled_reason ? `disabled: ${sub.disabled_reason}` : String(sub.status);
}

export function WebhooksPage() {
  const level = useLevel();
  const { can } = useSession();
  const subs = useLoad(() => request<Page<Subscription>>('GET', `${level.api}/subscriptions?limit=100`), [level.api]);
  const [created, setCreated] = useState<Subscription | null>(null);
  return (
    <main>
      <h1>{level.title}</h1>
      <p><Link to={`${level.page}/deliveries`}>Deliveries</Link></p>
      {created?.secret && (
        <OnceSecret label={`Signing secret of "${created.name}"`} value={String(created.secret)}>
          <p><Link to={`${level.page}/${created.id}`}>Open {created.name}</Link></p>
        </OnceSecret>
      )}
      <ErrorBox error={subs.error} />
      <table>
        <thead><tr><th>Name</th><th>URL</th><th>Format</th><th>Status</th><th>Created</th></tr></thead>
        <tbody>
          {subs.data?.data.map((s) => (
            <tr key={s.id}>
              <td><Link to={`${level.page}/${s.id}`}>{s.name}</Link></td>
              <td>{s.url}</td>
              <td>{s.payload_format}</td>
              <td><span className={`badge status-${s.status}`}>{statusText(s)}</span></td>
              <td><When at={s.created_at} /></td>
            </tr>
          ))}
        </tbody>
      </table>
      {can('webhooks:create') && (
        <>
          <h2>New subscription</h2>
          <SubscriptionForm
            level={level}
            onSaved={(sub) => {
              setCreated(sub);
              subs.reload();
            }}
          />
        </>
      )}
    </main>
  );
}

export function SubscriptionPage() {
  const level = useLevel();
  const { id = '' } = useParams();
  const { can } = useSession();
  const sub = useLoad(() => request<Subscription>('GET', `${level.api}/subscriptions/${id}`), [level.api, id]);
  const [secret, setSecret] = useState<{ secret: string; previous_secret_expires_at: string } | null>(null);
  const [notice, setNotice] = useState('');
  const [editing, setEditing] = useState(false);
  const action = useAction();
  const base = `${level.api}/subscriptions/${id}`;
  const setActive = (active: boolean) =>
    void action.run(async () => {
      await request('PATCH', base, { active });
      sub.reload();
    });
  const rotate = () => {
    if (!window.confirm('Rotate the signing secret? The old one keeps signing for the grace period.')) return;
    void action.run(async () => {
      setSecret(await request('POST', `${base}/rotate-secret`));
      sub.reload();
    });
  };
  const sendTest = () =>
    void action.run(async () => {
      const result = await request<{ delivery_id: string }>('POST', `${base}/test`);
      setNotice(`Test delivery ${result.delivery_id} queued.`);
    });
  const remove = () => {
    if (!window.confirm('Delete this subscription?')) return;
    void action.run(async () => {
      await request('DELETE', base);
      window.history.back();
    });
  };
  const s = sub.data;
  return (
    <main>
      <p><Link to={level.page}>← {level.title}</Link></p>
      <h1>Subscription {s?.name}</h1>
      <ErrorBox error={sub.error ?? action.error} />
      {secret && (
        <OnceSecret label="New signing secret" value={secret.secret}>
          <p>The previous secret stops signing at <When at={secret.previous_secret_expires_at} />.</p>
        </OnceSecret>
      )}
      {notice && <p role="status">{notice}</p>}
      {s && (
        <>
          <dl>
            <dt>URL</dt><dd>{s.url}</dd>
            <dt>Status</dt><dd data-testid="subscription-status">{statusText(s)}</dd>
            <dt>Events</dt><dd>{s.events?.join(', ')}</dd>
            <dt>Payload format</dt><dd>{s.payload_format}</dd>
            <dt>Previous secret signs until</dt><dd><When at={s.previous_secret_expires_at} /></dd>
          </dl>
          <div className="actions">
            <Link to={`${level.page}/deliveries?subscription_id=${id}`}>Deliveries of this subscription</Link>
            {can('webhooks:update') && <button type="button" onClick={sendTest}>Send test delivery</button>}
            {can('webhooks:update') && (
              <>
                <button type="button" onClick={() => setActive(!s.active)}>{s.active ? 'Disable' : 'Enable'}</button>
                <button type="button" onClick={rotate}>Rotate secret</button>
                <button type="button" onClick={() => setEditing(!editing)}>{editing ? 'Cancel edit' : 'Edit'}</button>
              </>
            )}
            {can('webhooks:delete') && <button type="button" onClick={remove}>Delete</button>}
          </div>
          {editing && (
            <SubscriptionForm
              level={level}
              initial={s}
              onSaved={() => {
                setEditing(false);
                sub.reload();
              }}
            />
          )}
        </>
      )}
    </main>
  );
}

interface Delivery {
  id: string;
  subscription_id: string;
  event_type: string;
  status: string;
  attempt_count: number;
  next_attempt_at: string | null;
  failure_reason: string | null;
  created_at: string;
  payload?: unknown;
}

export function DeliveriesPage() {
  const level = useLevel();
  const params = new URLSearchParams(window.location.search);
  const [filters, setFilters] = useState({ subscription_id: params.get('subscription_id') ?? '', event_type: '', status: '' });
  const [cursor, setCursor] = useState<string | null>(null);
  const query = new URLSearchParams({ limit: '25', ...Object.fromEntries(Object.entries(filters).filter(([, v]) => v)) });
  if (cursor) query.set('cursor', cursor);
  const list = useLoad(() => request<Page<Delivery>>('GET', `${level.api}/deliveries?${query}`), [level.api, query.toString()]);
  return (
    <main>
      <p><Link to={level.page}>← {level.title}</Link></p>
      <h1>Deliveries</h1>
      <form className="inline" onSubmit={(e) => e.preventDefault()}>
        <Field label="Subscription id" name="subscription_id" value={filters.subscription_id} onChange={(v) => { setCursor(null); setFilters({ ...filters, subscription_id: v }); }} />
        <Field label="Event type" name="event_type" value={filters.event_type} onChange={(v) => { setCursor(null); setFilters({ ...filters, event_type: v }); }} />
        <div className="field">
          <label htmlFor="delivery-status">Status</label>
          <select id="delivery-status" value={filters.status} onChange={(e) => { setCursor(null); setFilters({ ...filters, status: e.target.value }); }}>
            <option value="">any</option>
            <option>pending</option>
            <option>succeeded</option>
            <option>failed</option>
          </select>
        </div>
        <button type="button" onClick={list.reload}>Refresh</button>
      </form>
      <ErrorBox error={list.error} />
      <table>
        <thead><tr><th>Delivery</th><th>Event</th><th>Status</th><th>Attempts</th><th>Created</th></tr></thead>
        <tbody>
          {list.data?.data.map((d) => (
            <tr key={d.id}>
              <td><Link to={`${level.page}/deliveries/${d.id}`} state={d}>{d.id}</Link></td>
              <td>{d.event_type}</td>
              <td><span className={`badge delivery-${d.status}`}>{d.status}</span>{d.failure_reason ? ` (${d.failure_reason})` : ''}</td>
              <td>{d.attempt_count}</td>
              <td><When at={d.created_at} /></td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.next_cursor && <button type="button" onClick={() => setCursor(list.data!.next_cursor)}>Next page</button>}
    </main>
  );
}

type Attempt = {
  number: number;
  started_at: string;
  duration_ms: number;
  outcome: string;
  response_status: number | null;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  error: string | null;
};

export function DeliveryPage() {
  const level = useLevel();
  const { id = '' } = useParams();
  const location = useLocation();
  const fromList = (location.state as Delivery | null)?.id === id ? (location.state as Delivery) : undefined;
  // The API has no single-delivery route: the delivery comes with the list page's link, else from the newest 100.
  const delivery = useLoad(async () => {
    if (fromList) return fromList;
    const page = await request<Page<Delivery>>('GET', `${level.api}/deliveries?limit=100`);
    return page.data.find((d) => d.id === id);
  }, [level.api, id]);
  const attempts = useLoad(() => request<{ data: Attempt[] }>('GET', `${level.api}/deliveries/${id}/attempts`), [level.api, id]);
  const d = delivery.data;
  return (
    <main>
      <p><Link to={`${level.page}/deliveries`}>← Deliveries</Link></p>
      <h1>Delivery {id}</h1>
      <ErrorBox error={delivery.error ?? attempts.error} />
      {d && (
        <dl>
          <dt>Event</dt><dd>{d.event_type}</dd>
          <dt>Status</dt><dd data-testid="delivery-status">{d.status}</dd>
          <dt>Failure</dt><dd>{d.failure_reason ?? '—'}</dd>
          <dt>Next attempt</dt><dd><When at={d.next_attempt_at} /></dd>
        </dl>
      )}
      <h2>Attempts</h2>
      <table>
        <thead><tr><th>#</th><th>Time</th><th>Duration</th><th>Outcome</th><th>Response status</th><th>Error</th></tr></thead>
        <tbody>
          {attempts.data?.data.map((a) => (
            <tr key={a.number} data-testid="attempt">
              <td>{a.number}</td>
              <td><When at={a.started_at} /></td>
              <td>{a.duration_ms} ms</td>
              <td>{a.outcome}</td>
              <td data-testid="attempt-status">{a.response_status ?? '—'}</td>
              <td>{a.error ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {attempts.data?.data.map((a) => (
        <details key={a.number}>
          <summary>Attempt {a.number}: response headers and body</summary>
          <pre>{JSON.stringify(a.response_headers, null, 2)}</pre>
          <pre>{a.response_body}</pre>
        </details>
      ))}
      {d?.payload !== undefined && (
        <>
          <h2>Payload snapshot</h2>
          <pre data-testid="payload">{JSON.stringify(d.payload, null, 2)}</pre>
        </>
      )}
    </main>
  );
}
