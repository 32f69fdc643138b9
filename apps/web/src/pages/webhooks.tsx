// Webhooks at any of the three levels. One set of components, parameterised by the level's API base
// (/api/v1/webhooks, /api/v1/projects/{id}/webhooks, /api/v1/assessments/{id}/webhooks) and its page base.
import { useEffect, useState, type FormEvent } from 'react';
import { Link, useParams } from 'react-router-dom';
import { request } from '../api/client';
import type { operations } from '../api/schema';
import { useSession } from '../lib/session';
import { SudoConfirmation, SudoErrorBox, SudoPrompt, useSudo, useSudoChange } from '../lib/sudo';
import { EventChecklist } from '../lib/event-checklist';
import { subscriptionBody, subscriptionForm, type SubscriptionFormState } from '../lib/subscription-body';
import { ErrorBox, Field, OnceSecret, ShowMore, useAction, useLoad, usePagedLoad, When } from '../lib/ui';

type Json<T> = T extends { content: { 'application/json': infer J } } ? J : never;
type Subscription = Json<operations['getWebhooksSubscriptionsId']['responses'][200]> & { secret?: string };
type Delivery = Json<operations['getWebhooksDeliveriesId']['responses'][200]>;
type Attempt = Json<operations['getWebhooksDeliveriesIdAttempts']['responses'][200]>['data'][number];
type Recovered = Json<operations['postWebhooksSubscriptionsIdRecover']['responses'][202]>;
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

function Check({ label, checked, onChange }: { label: string; checked: boolean; onChange(value: boolean): void }) {
  return (
    <label className="check">
      <input type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} /> {label}
    </label>
  );
}

/**
 * Create or edit. Write-only values (the authorization header, the Entra client secret) start empty and are
 * sent only when typed; they live in this form's state until it is submitted or left, never in storage.
 */
function SubscriptionForm({ level, initial, onSaved }: { level: Level; initial?: Subscription; onSaved(sub: Subscription): void }) {
  const [form, setForm] = useState<SubscriptionFormState>(() => subscriptionForm(initial));
  const set = <K extends keyof SubscriptionFormState>(key: K) => (value: SubscriptionFormState[K]) => setForm((f) => ({ ...f, [key]: value }));
  const { busy, error, run } = useAction();
  // Creating one, or a new URL, from a sign-in more than 10 minutes old: the API asks for the password (sudo mode).
  const sudo = useSudo();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const built = subscriptionBody(form);
      if ('problem' in built) throw new Error(built.problem);
      const saved = await sudo.send((proof) =>
        initial?.id
          ? request<Subscription>('PATCH', `${level.api}/subscriptions/${initial.id}`, { ...built.body, ...proof })
          : request<Subscription>('POST', `${level.api}/subscriptions`, { ...built.body, ...proof }),
      );
      // The typed secrets are spent: nothing write-only stays in memory after a save.
      setForm((f) => ({ ...f, authorization: '', azureClientSecret: '', removeAuthorization: false, removeAzureCredentials: false }));
      onSaved(saved);
    });
  };
  const hasAzure = !!initial?.has_azure_credentials;
  return (
    <form onSubmit={submit} aria-label={initial ? 'Edit subscription' : 'Create subscription'}>
      <Field label="Subscription name" name="sub-name" value={form.name} onChange={set('name')} required />
      <Field label="Endpoint URL (https)" name="url" type="url" value={form.url} onChange={set('url')} required />
      <EventChecklist catalogue={`${level.api}/events`} selected={form.events} onChange={set('events')} />
      <div className="field">
        <label htmlFor="payload-format">Payload format</label>
        <select id="payload-format" value={form.payloadFormat} onChange={(e) => set('payloadFormat')(e.target.value)}>
          {FORMATS.map((f) => <option key={f}>{f}</option>)}
        </select>
      </div>
      <div className="field">
        <label htmlFor="signature-scheme">Signature scheme</label>
        <select id="signature-scheme" value={form.signatureScheme} onChange={(e) => set('signatureScheme')(e.target.value)}>
          <option value="service">service (X-Service-Signature)</option>
          <option value="standard_webhooks">standard_webhooks (webhook-signature as well)</option>
        </select>
      </div>
      <Field label={`Severity filter (comma-separated: ${SEVERITIES.join(', ')})`} name="severity" value={form.severity} onChange={set('severity')} />
      <Field label="Status filter (comma-separated)" name="status" value={form.status} onChange={set('status')} />
      <Field
        label="Rate limit (deliveries per second the receiver accepts; empty: none)"
        name="rate-limit"
        value={form.rateLimit}
        onChange={set('rateLimit')}
      />
      {form.payloadFormat === 'splunk_hec' && (
        <fieldset>
          <legend>Splunk HTTP Event Collector</legend>
          <Field label="Splunk index" name="splunk-index" value={form.splunkIndex} onChange={set('splunkIndex')} />
          <Field
            label="Splunk request channel (GUID, for HEC with indexer acknowledgement)"
            name="splunk-channel"
            value={form.splunkChannel}
            onChange={set('splunkChannel')}
            placeholder="xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
          />
          <Check
            label="Indexer acknowledgement (hec_ack): succeed only once Splunk reports the events indexed"
            checked={form.hecAck}
            onChange={set('hecAck')}
          />
          <p className="hint">The HEC token goes in the Authorization header below, as "Splunk &lt;token&gt;".</p>
        </fieldset>
      )}
      {form.payloadFormat === 'microsoft_sentinel' && (
        <fieldset>
          <legend>Microsoft Sentinel (Entra ID app)</legend>
          <p className="hint" data-testid="azure-state">
            {hasAzure
              ? 'Entra credentials are set. They are never shown; fill all three fields to replace them.'
              : 'The Entra ID application the service signs in as to the Logs Ingestion API: all three values together.'}
          </p>
          <Field label="Entra tenant id" name="azure-tenant-id" value={form.azureTenantId} onChange={set('azureTenantId')} autoComplete="off" />
          <Field label="Entra client id" name="azure-client-id" value={form.azureClientId} onChange={set('azureClientId')} autoComplete="off" />
          <Field
            label="Entra client secret"
            name="azure-client-secret"
            type="password"
            value={form.azureClientSecret}
            onChange={set('azureClientSecret')}
            autoComplete="new-password"
          />
          {hasAzure && <Check label="Remove the stored Entra credentials" checked={form.removeAzureCredentials} onChange={set('removeAzureCredentials')} />}
        </fieldset>
      )}
      {form.payloadFormat !== 'microsoft_sentinel' && hasAzure && (
        <fieldset>
          <legend>Stored Entra credentials</legend>
          <p className="hint" data-testid="azure-leftover">
            This subscription still holds the Entra credentials it was given as microsoft_sentinel. This format sends them
            nowhere, but they stay bound to their host: remove them here, or a URL on another host is refused.
          </p>
          <Check label="Remove the stored Entra credentials" checked={form.removeAzureCredentials} onChange={set('removeAzureCredentials')} />
        </fieldset>
      )}
      <Field
        label={initial?.has_authorization ? 'Authorization header (set; type to replace)' : 'Authorization header (optional)'}
        name="authorization"
        type="password"
        value={form.authorization}
        onChange={set('authorization')}
        autoComplete="new-password"
      />
      {initial?.has_authorization && (
        <Check label="Remove the stored Authorization header" checked={form.removeAuthorization} onChange={set('removeAuthorization')} />
      )}
      {(initial?.has_authorization || hasAzure) && (
        <p className="hint">Stored credentials go only to the host they were given for: a URL on another host, port or scheme needs them again here.</p>
      )}
      <SudoErrorBox error={error} />
      <SudoPrompt sudo={sudo} what={initial ? 'send its events to the new URL' : 'create this subscription'} />
      <button type="submit" disabled={busy || form.events.length === 0 || (sudo.asked && !sudo.hasPassword)}>{initial ? 'Save' : 'Create subscription'}</button>
    </form>
  );
}

function statusText(sub: Subscription): string {
  return sub.status === 'disabled' && sub.disabled_reason ? `disabled: ${sub.disabled_reason}` : String(sub.status);
}

export function WebhooksPage() {
  const level = useLevel();
  const { can } = useSession();
  const subs = usePagedLoad((cursor) => request<Page<Subscription>>('GET', `${level.api}/subscriptions?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`), [level.api]);
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
      <ShowMore list={subs} what="subscriptions" />
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

/** A datetime-local value (the browser's time zone) as an ISO instant, or undefined when empty. */
function isoFromLocal(value: string): string | undefined {
  if (!value) return undefined;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw new Error(`Not a date and time: ${value}`);
  return date.toISOString();
}

/** Re-queue the failed deliveries of a window (POST .../subscriptions/{id}/recover). */
function RecoverForm({ base, deliveriesLink }: { base: string; deliveriesLink: string }) {
  const [since, setSince] = useState('');
  const [until, setUntil] = useState('');
  const [result, setResult] = useState<Recovered | null>(null);
  const { busy, error, run } = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      setResult(null);
      const body: Record<string, string> = { since: isoFromLocal(since)! };
      const end = isoFromLocal(until);
      if (end) body.until = end;
      setResult(await request<Recovered>('POST', `${base}/recover`, body));
    });
  };
  return (
    <section aria-labelledby="recover-heading">
      <h2 id="recover-heading">Recover failed deliveries</h2>
      <p className="hint">
        Sends the failed deliveries of a window again, as new deliveries (at most 30 days back; a delivery is recovered only once).
      </p>
      <form className="inline" onSubmit={submit} aria-label="Recover failed deliveries">
        <Field label="Failed since" name="recover-since" type="datetime-local" value={since} onChange={setSince} required />
        <Field label="Until (empty: now)" name="recover-until" type="datetime-local" value={until} onChange={setUntil} />
        <button type="submit" disabled={busy || !since}>Recover</button>
      </form>
      <ErrorBox error={error} />
      {result && (
        <p role="status" className="ok" data-testid="recovered">
          Re-queued {result.requeued} {result.requeued === 1 ? 'delivery' : 'deliveries'} failed between <When at={result.since} /> and{' '}
          <When at={result.until} />.{result.more ? ' More remain in the window: recover again.' : ''}{' '}
          <Link to={deliveriesLink}>See the deliveries</Link>
        </p>
      )}
    </section>
  );
}

/** The worker's circuit breaker for the endpoint, as a person reads it. */
function breakerText(breaker: Subscription['breaker']): string {
  if (!breaker || breaker.state === 'closed') return 'closed (deliveries flow)';
  if (breaker.state === 'half_open') return 'half-open (one probe delivery is testing the endpoint)';
  const until = breaker.until ? new Date(breaker.until).toLocaleString() : 'soon';
  return `open: the endpoint did not answer; deliveries are postponed, not attempted, until a probe at ${until}`;
}

export function SubscriptionPage() {
  const level = useLevel();
  const { id = '' } = useParams();
  const { can } = useSession();
  const sub = useLoad(() => request<Subscription>('GET', `${level.api}/subscriptions/${id}`), [level.api, id]);
  const [secret, setSecret] = useState<{ secret: string; previous_secret_expires_at: string } | null>(null);
  const [notice, setNotice] = useState<{ text: string; delivery: string } | null>(null);
  const [editing, setEditing] = useState(false);
  const action = useAction();
  const base = `${level.api}/subscriptions/${id}`;
  // Re-enabling and rotating the secret, from a sign-in more than 10 minutes old: the API asks for the password (sudo
  // mode), and the change waits in a confirmation form.
  const change = useSudoChange(action.run, sub.reload);
  const setActive = (active: boolean) =>
    change.start({
      // Only turning it on may be asked for the password; the texts are for that case.
      form: 'Confirm enabling the subscription',
      what: 'send its events again',
      submit: 'Enable the subscription',
      send: (proof) => request('PATCH', base, { active, ...proof }),
    });
  const rotate = () => {
    if (!window.confirm('Rotate the signing secret? The old one keeps signing for the grace period.')) return;
    change.start({
      form: 'Confirm the secret rotation',
      what: 'rotate the signing secret',
      submit: 'Rotate the secret',
      send: async (proof) => setSecret(await request('POST', `${base}/rotate-secret`, proof)),
    });
  };
  const sendTest = () =>
    void action.run(async () => {
      const result = await request<{ delivery_id: string }>('POST', `${base}/test`);
      setNotice({ text: `Test delivery ${result.delivery_id} queued.`, delivery: result.delivery_id });
    });
  const remove = () => {
    if (!window.confirm('Delete this subscription?')) return;
    void action.run(async () => {
      await request('DELETE', base);
      window.history.back();
    });
  };
  const s = sub.data;
  const deliveriesLink = `${level.page}/deliveries?subscription_id=${id}`;
  return (
    <main>
      <p><Link to={level.page}>← {level.title}</Link></p>
      <h1>Subscription {s?.name}</h1>
      <SudoErrorBox error={sub.error ?? action.error} />
      <SudoConfirmation change={change} busy={action.busy} />
      {secret && (
        <OnceSecret label="New signing secret" value={secret.secret}>
          <p>The previous secret stops signing at <When at={secret.previous_secret_expires_at} />.</p>
        </OnceSecret>
      )}
      {notice && (
        <p role="status">
          {notice.text} <Link to={`${level.page}/deliveries/${notice.delivery}`}>Open it</Link>
        </p>
      )}
      {s && (
        <>
          <dl>
            <dt>Id</dt><dd>{s.id}</dd>
            <dt>URL</dt><dd>{s.url}</dd>
            <dt>Status</dt><dd data-testid="subscription-status">{statusText(s)}</dd>
            <dt>Events</dt><dd>{s.events?.join(', ')}</dd>
            <dt>Payload format</dt><dd>{s.payload_format}</dd>
            <dt>Signature scheme</dt><dd data-testid="signature-scheme">{s.signature_scheme}</dd>
            <dt>Circuit breaker</dt>
            <dd data-testid="breaker-state">
              {breakerText(s.breaker)}
            </dd>
            <dt>Rate limit</dt><dd>{s.rate_limit ? `${s.rate_limit} per second` : 'none'}</dd>
            {s.payload_format === 'splunk_hec' && (
              <>
                <dt>Splunk index</dt><dd>{s.splunk_index ?? '—'}</dd>
                <dt>Splunk channel</dt><dd>{s.splunk_channel ?? '—'}</dd>
                <dt>Indexer acknowledgement</dt><dd data-testid="hec-ack">{s.hec_ack ? 'on' : 'off'}</dd>
              </>
            )}
            {(s.payload_format === 'microsoft_sentinel' || s.has_azure_credentials) && (
              <>
                <dt>Entra credentials</dt><dd>{s.has_azure_credentials ? 'set (never shown)' : 'not set'}</dd>
              </>
            )}
            <dt>Authorization header</dt><dd>{s.has_authorization ? 'set (never shown)' : 'none'}</dd>
            <dt>Severity filter</dt><dd>{s.severity_filter?.join(', ') ?? 'all'}</dd>
            <dt>Status filter</dt><dd>{s.status_filter?.join(', ') ?? 'all'}</dd>
            <dt>Previous secret signs until</dt><dd><When at={s.previous_secret_expires_at} /></dd>
          </dl>
          <div className="actions">
            <Link to={deliveriesLink}>Deliveries of this subscription</Link>
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
          {can('webhooks:update') && <RecoverForm base={base} deliveriesLink={deliveriesLink} />}
        </>
      )}
    </main>
  );
}

export function DeliveriesPage() {
  const level = useLevel();
  const params = new URLSearchParams(window.location.search);
  const [filters, setFilters] = useState({ subscription_id: params.get('subscription_id') ?? '', event_type: '', status: '', since: '', until: '' });
  const [cursor, setCursor] = useState<string | null>(null);
  const setFilter = (key: keyof typeof filters) => (value: string) => {
    setCursor(null);
    setFilters({ ...filters, [key]: value });
  };
  const query = new URLSearchParams({ limit: '25' });
  for (const [key, value] of Object.entries(filters)) {
    if (!value) continue;
    const when = key === 'since' || key === 'until';
    const date = when ? new Date(value) : null;
    if (date && Number.isNaN(date.getTime())) continue;
    query.set(key, date ? date.toISOString() : value);
  }
  if (cursor) query.set('cursor', cursor);
  const list = useLoad(() => request<Page<Delivery>>('GET', `${level.api}/deliveries?${query}`), [level.api, query.toString()]);
  return (
    <main>
      <p><Link to={level.page}>← {level.title}</Link></p>
      <h1>Deliveries</h1>
      <form className="inline" onSubmit={(e) => e.preventDefault()}>
        <Field label="Subscription id" name="subscription_id" value={filters.subscription_id} onChange={setFilter('subscription_id')} />
        <Field label="Event type" name="event_type" value={filters.event_type} onChange={setFilter('event_type')} />
        <div className="field">
          <label htmlFor="delivery-status">Status</label>
          <select id="delivery-status" value={filters.status} onChange={(e) => setFilter('status')(e.target.value)}>
            <option value="">any</option>
            <option>pending</option>
            <option>succeeded</option>
            <option>failed</option>
          </select>
        </div>
        <Field label="Created since" name="since" type="datetime-local" value={filters.since} onChange={setFilter('since')} />
        <Field label="Created until" name="until" type="datetime-local" value={filters.until} onChange={setFilter('until')} />
        <button type="button" onClick={list.reload}>Refresh</button>
      </form>
      <ErrorBox error={list.error} />
      <table>
        <thead><tr><th>Delivery</th><th>Event</th><th>Status</th><th>Attempts</th><th>Created</th><th>Redelivery of</th></tr></thead>
        <tbody>
          {list.data?.data.map((d) => (
            <tr key={d.id}>
              <td><Link to={`${level.page}/deliveries/${d.id}`}>{d.id}</Link></td>
              <td>{d.event_type}</td>
              <td><span className={`badge delivery-${d.status}`}>{d.status}</span>{d.failure_reason ? ` (${d.failure_reason})` : ''}</td>
              <td>{d.attempt_count}</td>
              <td><When at={d.created_at} /></td>
              <td>{d.redelivery_of ? <Link to={`${level.page}/deliveries/${d.redelivery_of}`}>{d.redelivery_of}</Link> : '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.next_cursor && <button type="button" onClick={() => setCursor(list.data!.next_cursor)}>Next page</button>}
    </main>
  );
}

function retryAfterText(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}

export function DeliveryPage() {
  const { id = '' } = useParams();
  // Keyed by id: opening the resent delivery starts with a fresh page (no notice of the previous one).
  return <DeliveryView key={id} id={id} />;
}

function DeliveryView({ id }: { id: string }) {
  const level = useLevel();
  const { can } = useSession();
  const delivery = useLoad(() => request<Delivery>('GET', `${level.api}/deliveries/${id}`), [level.api, id]);
  const attempts = useLoad(() => request<{ data: Attempt[] }>('GET', `${level.api}/deliveries/${id}/attempts`), [level.api, id]);
  const [resent, setResent] = useState<Delivery | null>(null);
  const action = useAction();
  const d = delivery.data;
  const pending = d?.status === 'pending';
  // While the worker still owns it, the page follows it.
  useEffect(() => {
    if (!pending) return;
    const timer = setInterval(() => {
      delivery.reload();
      attempts.reload();
    }, 2000);
    return () => clearInterval(timer);
  }, [pending, delivery.reload, attempts.reload]);
  const resend = () =>
    void action.run(async () => {
      setResent(await request<Delivery>('POST', `${level.api}/deliveries/${id}/resend`));
    });
  return (
    <main>
      <p><Link to={`${level.page}/deliveries`}>← Deliveries</Link></p>
      <h1>Delivery {id}</h1>
      <ErrorBox error={delivery.error ?? attempts.error} />
      {d && (
        <>
          <dl>
            <dt>Event</dt><dd>{d.event_type} ({d.event_id})</dd>
            <dt>Subscription</dt><dd><Link to={`${level.page}/${d.subscription_id}`}>{d.subscription_id}</Link></dd>
            <dt>Status</dt><dd data-testid="delivery-status">{d.status}</dd>
            <dt>Attempts</dt><dd>{d.attempt_count}</dd>
            <dt>Failure</dt><dd data-testid="delivery-failure">{d.failure_reason ?? '—'}</dd>
            <dt>Created</dt><dd><When at={d.created_at} /></dd>
            <dt>Completed</dt><dd><When at={d.completed_at} /></dd>
            <dt>Next attempt</dt><dd><When at={d.next_attempt_at} />{d.wait_reason ? ` (${d.wait_reason.replace(/_/g, ' ')})` : ''}</dd>
            {d.redelivery_of && (
              <>
                <dt>Redelivery of</dt>
                <dd><Link to={`${level.page}/deliveries/${d.redelivery_of}`}>{d.redelivery_of}</Link></dd>
              </>
            )}
          </dl>
          {can('webhooks:update') && (
            <div className="actions">
              <button type="button" onClick={resend} disabled={action.busy || pending}>Resend</button>
              {pending && <span className="hint">A pending delivery can be resent once it has succeeded or failed.</span>}
            </div>
          )}
          <ErrorBox error={action.error} />
          {resent && (
            <p role="status" className="ok" data-testid="resent">
              Resent as a new delivery: <Link to={`${level.page}/deliveries/${resent.id}`}>{resent.id}</Link>
            </p>
          )}
        </>
      )}
      <h2>Attempts</h2>
      {attempts.data?.data.length === 0 && <p>No attempt yet.</p>}
      <table>
        <thead>
          <tr><th>#</th><th>Time</th><th>Duration</th><th>Outcome</th><th>Response status</th><th>Retry-After</th><th>Error</th></tr>
        </thead>
        <tbody>
          {attempts.data?.data.map((a) => (
            <tr key={a.number} data-testid="attempt">
              <td>{a.number}</td>
              <td><When at={a.started_at} /></td>
              <td>{a.duration_ms} ms</td>
              <td data-testid="attempt-outcome">{a.outcome}</td>
              <td data-testid="attempt-status">{a.response_status ?? '—'}</td>
              <td>{retryAfterText(a.retry_after_ms)}</td>
              <td>{a.error ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {attempts.data?.data.map((a) => (
        <details key={a.number} data-testid="attempt-detail">
          <summary>Attempt {a.number}: response headers and body</summary>
          <h3>Response headers</h3>
          <pre>{a.response_headers ? Object.entries(a.response_headers).map(([k, v]) => `${k}: ${v}`).join('\n') : '—'}</pre>
          <h3>Response body (excerpt)</h3>
          <pre data-testid="attempt-body">{a.response_body || '—'}</pre>
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
