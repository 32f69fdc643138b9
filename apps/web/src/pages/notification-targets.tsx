// Notification targets: Slack, Microsoft Teams and e-mail destinations of the organization's events, with their
// delivery status (last sent, last error), a test message, enable/disable, edit and revoke. Creating one, a new URL
// or recipient, or enabling a disabled one, from a sign-in more than 10 minutes old: the API asks for the password
// (sudo mode, lib/sudo.tsx).
import { useState, type FormEvent } from 'react';
import { request } from '../api/client';
import type { operations } from '../api/schema';
import { useSession } from '../lib/session';
import { EventChecklist } from '../lib/event-checklist';
import { emptyTargetForm, targetBody, type TargetFormState, type TargetKind } from '../lib/target-body';
import { SudoConfirmation, SudoErrorBox, SudoPrompt, useSudo, useSudoChange } from '../lib/sudo';
import { ErrorBox, Field, ShowMore, useAction, useLoad, usePagedLoad, When } from '../lib/ui';

type Json<T> = T extends { content: { 'application/json': infer J } } ? J : never;
type Target = Json<operations['getNotificationTargetsId']['responses'][200]>;
type Page<T> = { data: T[]; next_cursor: string | null };

const API = '/api/v1/notification-targets';
const KINDS: Array<[TargetKind, string]> = [['slack', 'Slack'], ['teams', 'Microsoft Teams'], ['email', 'E-mail']];
const SEVERITIES = ['critical', 'high', 'medium', 'low', 'info'];

function TargetForm({ initial, onSaved, onCancel }: { initial?: Target; onSaved(target: Target): void; onCancel?(): void }) {
  const [form, setForm] = useState<TargetFormState>(() =>
    initial
      ? { kind: initial.kind as TargetKind, name: initial.name, url: '', recipients: initial.recipients.join(', '), events: initial.events, severity: initial.severity_filter?.join(', ') ?? '' }
      : emptyTargetForm(),
  );
  const set = <K extends keyof TargetFormState>(key: K) => (value: TargetFormState[K]) => setForm((f) => ({ ...f, [key]: value }));
  const { busy, error, run } = useAction();
  const sudo = useSudo();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const built = targetBody(form, !!initial);
      if ('problem' in built) throw new Error(built.problem);
      const saved = await sudo.send((proof) =>
        initial
          ? request<Target>('PATCH', `${API}/${initial.id}`, { ...built.body, ...proof })
          : request<Target>('POST', API, { ...built.body, ...proof }),
      );
      setForm((f) => ({ ...f, url: '' })); // the URL is a credential: not kept after a save
      onSaved(saved);
    });
  };
  return (
    <form onSubmit={submit} aria-label={initial ? `Edit ${initial.name}` : 'Create notification target'}>
      {!initial && (
        <div className="field">
          <label htmlFor="target-kind">Kind</label>
          <select id="target-kind" value={form.kind} onChange={(e) => set('kind')(e.target.value as TargetKind)}>
            {KINDS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
          </select>
        </div>
      )}
      <Field label="Target name" name="target-name" value={form.name} onChange={set('name')} required />
      {form.kind === 'email' ? (
        <Field label="Recipients (comma-separated e-mail addresses)" name="recipients" value={form.recipients} onChange={set('recipients')} />
      ) : (
        <Field
          label={initial ? 'Webhook URL (set; never shown: paste to replace)' : form.kind === 'slack' ? 'Slack incoming webhook URL' : 'Teams workflow webhook URL'}
          name="target-url"
          type="password"
          value={form.url}
          onChange={set('url')}
          autoComplete="off"
        />
      )}
      <EventChecklist catalogue={`${API}/events`} selected={form.events} onChange={set('events')} />
      <Field label={`Severity filter (comma-separated: ${SEVERITIES.join(', ')})`} name="target-severity" value={form.severity} onChange={set('severity')} />
      <SudoErrorBox error={error} />
      <SudoPrompt sudo={sudo} what={initial ? 'send its messages to the new address' : 'create this target'} />
      <button type="submit" disabled={busy || (sudo.asked && !sudo.hasPassword)}>{initial ? 'Save' : 'Create target'}</button>
      {onCancel && <button type="button" onClick={onCancel}>Cancel</button>}
    </form>
  );
}

function destination(t: Target): string {
  return t.kind === 'email' ? t.recipients.join(', ') : `${t.url_host ?? ''} (URL hidden)`;
}

function statusText(t: Target): string {
  return t.status === 'disabled' && t.disabled_reason ? `disabled: ${t.disabled_reason}` : String(t.status);
}

function TargetRow({ target, onChanged, onEdit }: { target: Target; onChanged(): void; onEdit(): void }) {
  const { can } = useSession();
  const { busy, error, run } = useAction();
  const [tested, setTested] = useState<string | null>(null);
  const configure = can('notification_targets:configure');
  const change = useSudoChange(run, onChanged);
  const setActive = (active: boolean) =>
    change.start({
      // Only turning it on may be asked for the password; the texts are for that case.
      form: `Confirm enabling ${target.name}`,
      what: 'send its messages again',
      submit: 'Enable the target',
      send: (proof) => request('PATCH', `${API}/${target.id}`, { active, ...proof }),
    });
  return (
    <tr data-testid={`target-${target.name}`}>
      <td>{target.name}</td>
      <td>{KINDS.find(([k]) => k === target.kind)?.[1]}</td>
      <td>{destination(target)}</td>
      <td>{target.events.join(', ')}{target.severity_filter ? ` (${target.severity_filter.join(', ')})` : ''}</td>
      <td><span className={`badge status-${target.status}`}>{statusText(target)}</span></td>
      <td data-testid="last-sent">{target.last_sent_at ? <When at={target.last_sent_at} /> : 'never'}</td>
      <td data-testid="last-error">{target.last_error ? <>{target.last_error} (<When at={target.last_error_at} />)</> : '—'}</td>
      <td>
        {can('notification_targets:test') && (
          <button type="button" disabled={busy} onClick={() => void run(async () => {
            await request('POST', `${API}/${target.id}/test`);
            setTested('Test message queued');
            setTimeout(onChanged, 1500);
          })}>Send test</button>
        )}
        {configure && <button type="button" onClick={onEdit}>Edit</button>}
        {configure && (
          <button type="button" disabled={busy} onClick={() => setActive(!target.active)}>{target.active ? 'Disable' : 'Enable'}</button>
        )}
        {configure && (
          <button type="button" disabled={busy} onClick={() => void run(async () => {
            if (!window.confirm(`Revoke ${target.name}?`)) return;
            await request('DELETE', `${API}/${target.id}`);
            onChanged();
          })}>Revoke</button>
        )}
        {tested && <span role="status">{tested}</span>}
        <SudoErrorBox error={error} />
        <SudoConfirmation change={change} busy={busy} />
      </td>
    </tr>
  );
}

export function NotificationTargetsPage() {
  const { can } = useSession();
  const targets = usePagedLoad((cursor) => request<Page<Target>>('GET', `${API}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`));
  const [editing, setEditing] = useState<Target | null>(null);
  return (
    <main>
      <h1>Notification targets</h1>
      <p className="hint">Slack channels, Teams channels and mailing lists that hear about the events they choose.</p>
      <ErrorBox error={targets.error} />
      <table>
        <thead><tr><th>Name</th><th>Kind</th><th>Destination</th><th>Events</th><th>Status</th><th>Last sent</th><th>Last error</th><th /></tr></thead>
        <tbody>
          {targets.data?.data.map((t) => <TargetRow key={t.id} target={t} onChanged={targets.reload} onEdit={() => setEditing(t)} />)}
        </tbody>
      </table>
      <ShowMore list={targets} what="notification targets" />
      {editing && (
        <>
          <h2>Edit {editing.name}</h2>
          <TargetForm key={editing.id} initial={editing} onSaved={() => { setEditing(null); targets.reload(); }} onCancel={() => setEditing(null)} />
        </>
      )}
      {can('notification_targets:configure') && !editing && (
        <>
          <h2>New notification target</h2>
          <TargetForm onSaved={() => targets.reload()} />
        </>
      )}
      {!can('notification_targets:configure') && <p className="hint">Owners and admins configure and test notification targets.</p>}
    </main>
  );
}
