// Profile (password change, 2FA on with a locally rendered QR code and off, each with the current password) and Settings -> API keys
// (creating one from a sign-in more than 10 minutes old asks for the password: lib/sudo.tsx).
import { useEffect, useState, type FormEvent } from 'react';
import QRCode from 'qrcode';
import { Link } from 'react-router-dom';
import { ApiError, client, unwrap } from '../api/client';
import { keyLimits, type KeyPolicy } from '../lib/key-policy';
import { groupScopes, wildcardOptions } from '../lib/scopes';
import { useSession } from '../lib/session';
import { SudoErrorBox, SudoPrompt, useSudo } from '../lib/sudo';
import { ErrorBox, Field, loadAllPages, OnceSecret, ShowMore, useAction, useLoad, usePagedLoad, When } from '../lib/ui';

/**
 * Turning 2FA on or off asks the person to prove who they are again (a session alone must not do either): the
 * current password when the account has one (has_password), else nothing to type, but the session must come from a
 * recent sign-in. The password is sent with the call and cleared from the page whatever the answer.
 */
function useReauthentication(hasPassword: boolean) {
  const [currentPassword, setCurrentPassword] = useState('');
  const send = async <T,>(call: (proof: { current_password?: string }) => Promise<T>): Promise<T> => {
    try {
      return await call(hasPassword ? { current_password: currentPassword } : {});
    } finally {
      setCurrentPassword(''); // never kept on the page
    }
  };
  const field = (name: string) =>
    hasPassword ? (
      <Field label="Current password" name={name} type="password" value={currentPassword} onChange={setCurrentPassword} autoComplete="current-password" required />
    ) : (
      <p className="hint">Your account signs in with GitHub or Google and has no password: if you signed in more than a few minutes ago, you will be asked to sign in again.</p>
    );
  return { send, field };
}

/** An account without a password, its sign-in too old: the way on is a new sign-in (403 REAUTHENTICATION_REQUIRED). */
function SignInAgain({ error, then }: { error: unknown; then: string }) {
  if (!(error instanceof ApiError && error.code === 'REAUTHENTICATION_REQUIRED')) return null;
  return (
    <p>
      <Link to={`/login?next=${encodeURIComponent('/profile')}`}>Sign in again</Link>, then {then}.
    </p>
  );
}

function TwoFactorSetup({ hasPassword, onDone }: { hasPassword: boolean; onDone(): void }) {
  const [setup, setSetup] = useState<{ secret: string; otpauth_url: string } | null>(null);
  const [qr, setQr] = useState('');
  const [code, setCode] = useState('');
  const reauthentication = useReauthentication(hasPassword);
  const { busy, error, run } = useAction();
  useEffect(() => {
    if (setup) QRCode.toDataURL(setup.otpauth_url, { margin: 1, width: 200 }).then(setQr, () => setQr(''));
  }, [setup]);
  const start = () => void run(async () => setSetup(await unwrap(client.POST('/api/v1/auth/2fa/setup'))));
  const enable = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      await reauthentication.send((proof) => unwrap(client.POST('/api/v1/auth/2fa/enable', { body: { code, ...proof } })));
      setSetup(null);
      onDone();
    });
  };
  // At setup or at enable.
  const signInAgain = <SignInAgain error={error} then="set up two-factor authentication once more" />;
  if (!setup) {
    return (
      <>
        <ErrorBox error={error} />
        {signInAgain}
        <button type="button" onClick={start} disabled={busy}>Set up two-factor authentication</button>
      </>
    );
  }
  return (
    <form onSubmit={enable} aria-label="Enable two-factor authentication">
      <p>Scan this code with an authenticator app, or type the secret in by hand.</p>
      {qr && <img src={qr} alt="QR code of the authenticator setup link" width={200} height={200} />}
      <p>
        Secret: <code data-testid="totp-secret">{setup.secret}</code>
      </p>
      <Field label="Code from the app" name="code" value={code} onChange={setCode} inputMode="numeric" autoComplete="one-time-code" required />
      {reauthentication.field('enable-current-password')}
      <p className="hint">Your other sessions are signed out; this one stays.</p>
      <ErrorBox error={error} />
      {signInAgain}
      <button type="submit" disabled={busy}>Enable</button>
    </form>
  );
}

function TwoFactorDisable({ hasPassword, onDone }: { hasPassword: boolean; onDone(): void }) {
  const [code, setCode] = useState('');
  const reauthentication = useReauthentication(hasPassword);
  const { busy, error, run } = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      await reauthentication.send((proof) => unwrap(client.POST('/api/v1/auth/2fa/disable', { body: { code, ...proof } })));
      onDone();
    });
  };
  return (
    <form onSubmit={submit} aria-label="Disable two-factor authentication">
      <Field label="Code to disable" name="disable-code" value={code} onChange={setCode} inputMode="numeric" autoComplete="one-time-code" required />
      {reauthentication.field('disable-current-password')}
      <ErrorBox error={error} />
      <SignInAgain error={error} then="turn two-factor authentication off" />
      <button type="submit" disabled={busy}>Disable two-factor authentication</button>
    </form>
  );
}

const NO_PASSWORDS = { current: '', next: '', confirmation: '' };

/**
 * The person's own password. The confirmation is compared here, so a typo never reaches the API; the API checks
 * the current password and the length rule and answers with the detail shown. This session stays signed in.
 */
function ChangePassword() {
  const [fields, setFields] = useState(NO_PASSWORDS);
  const [changed, setChanged] = useState(false);
  const { busy, error, run } = useAction();
  const set = (key: keyof typeof NO_PASSWORDS) => (value: string) => setFields({ ...fields, [key]: value });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setChanged(false);
    void run(async () => {
      if (fields.next !== fields.confirmation) throw new Error('The new password and its confirmation do not match.');
      await unwrap(client.POST('/api/v1/auth/password', { body: { current_password: fields.current, new_password: fields.next } }));
      setFields(NO_PASSWORDS);
      setChanged(true);
    });
  };
  return (
    <section aria-labelledby="change-password">
      <h2 id="change-password">Change password</h2>
      <form onSubmit={submit} aria-labelledby="change-password">
        <Field label="Current password" name="current-password" type="password" value={fields.current} onChange={set('current')} autoComplete="current-password" required />
        <Field label="New password" name="new-password" type="password" value={fields.next} onChange={set('next')} autoComplete="new-password" required />
        <Field label="Confirm new password" name="confirm-new-password" type="password" value={fields.confirmation} onChange={set('confirmation')} autoComplete="new-password" required />
        <p className="hint">The new password: at least 10 characters, at most 72 bytes. Your other sessions are signed out; this one stays.</p>
        <ErrorBox error={error} />
        {changed && <p role="status" className="ok">Password changed. Your other sessions were signed out.</p>}
        <button type="submit" disabled={busy}>Change password</button>
      </form>
    </section>
  );
}

export function ProfilePage() {
  const { me, refresh } = useSession();
  if (!me) return null;
  return (
    <main>
      <h1>Profile</h1>
      <dl>
        <dt>Name</dt>
        <dd>{me.user?.name}</dd>
        <dt>E-mail</dt>
        <dd>{me.user?.email}</dd>
        <dt>Organization</dt>
        <dd>{me.organization?.name}</dd>
        <dt>Role</dt>
        <dd>{me.role}</dd>
      </dl>
      <h2>Two-factor authentication</h2>
      <p role="status" data-testid="two-factor-status">
        Two-factor authentication is {me.user?.two_factor_enabled ? 'on' : 'off'}.
      </p>
      {me.user?.two_factor_enabled ? (
        <TwoFactorDisable hasPassword={me.user?.has_password !== false} onDone={refresh} />
      ) : (
        <TwoFactorSetup hasPassword={me.user?.has_password !== false} onDone={refresh} />
      )}
      {me.user?.has_password === false ? (
        <section aria-labelledby="password">
          <h2 id="password">Password</h2>
          <p data-testid="no-password">Your account signs in with GitHub or Google: it has no password to change.</p>
          <p>
            To sign in with a password too, <Link to="/forgot-password">set one by e-mail</Link>: a link to choose it goes to your address.
          </p>
        </section>
      ) : (
        <ChangePassword />
      )}
      <PersonalSourceConnection />
    </main>
  );
}

/** The person's own GitHub account for assessments of private repositories: connect (a link into the OAuth flow), status, disconnect. */
function PersonalSourceConnection() {
  const { can } = useSession();
  const connections = useLoad(() => unwrap(client.GET('/api/v1/profile/source-connections')));
  const github = connections.data?.data?.find((c) => c.provider === 'github');
  const action = useAction();
  const disconnect = () => {
    if (!window.confirm('Disconnect your GitHub account? Its token is deleted.')) return;
    void action.run(async () => {
      await unwrap(client.DELETE('/api/v1/profile/source-connections/{provider}', { params: { path: { provider: 'github' } } }));
      connections.reload();
    });
  };
  return (
    <section aria-label="Personal GitHub account">
      <h2>Personal GitHub account</h2>
      <ErrorBox error={connections.error ?? action.error} />
      <p role="status" data-testid="source-connection-status">
        {github
          ? `Connected as ${github.login} (${github.scopes?.join(', ')}) since ${new Date(github.connected_at!).toLocaleString()}.`
          : 'No GitHub account is connected.'}
      </p>
      {github && <button type="button" onClick={disconnect}>Disconnect GitHub</button>}
      {can('source:connect_personal') && (
        // A full page navigation: GitHub's authorization page, then back to this profile.
        <a className="button" href="/api/v1/profile/source-connections/github/connect">{github ? 'Reconnect GitHub' : 'Connect GitHub'}</a>
      )}
    </section>
  );
}

type CreatedKey = { name?: string; key?: string };

const daysOrNull = (text: string) => (text.trim() === '' ? null : Number(text));

export function KeyPolicyPage() {
  const { can } = useSession();
  const policy = useLoad(() => unwrap(client.GET('/api/v1/organization/api-key-policy')));
  const [form, setForm] = useState<Record<string, string> | null>(null);
  const [saved, setSaved] = useState(false);
  const { busy, error, run } = useAction();
  const p = policy.data as KeyPolicy | undefined;
  const values = form ?? {
    enabled: String(!!p?.enabled),
    require_expiration: String(!!p?.require_expiration),
    max_lifetime_days: p?.max_lifetime_days?.toString() ?? '',
    warn_days_before: p?.warn_days_before?.toString() ?? '',
    inactivity_days: p?.inactivity_days?.toString() ?? '',
  };
  const set = (key: string) => (value: string) => setForm({ ...values, [key]: value });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const body = {
        enabled: values.enabled === 'true',
        require_expiration: values.require_expiration === 'true',
        max_lifetime_days: daysOrNull(values.max_lifetime_days),
        warn_days_before: daysOrNull(values.warn_days_before),
        inactivity_days: daysOrNull(values.inactivity_days),
      };
      await unwrap(client.PUT('/api/v1/organization/api-key-policy', { body }));
      setSaved(true);
      policy.reload();
    });
  };
  const editable = can('org:update');
  return (
    <main>
      <h1>API-key policy</h1>
      <ErrorBox error={policy.error} />
      <form onSubmit={submit}>
        <fieldset disabled={!editable}>
          <label className="check"><input type="checkbox" checked={values.enabled === 'true'} onChange={(e) => set('enabled')(String(e.target.checked))} /> Policy enabled</label>
          <label className="check"><input type="checkbox" checked={values.require_expiration === 'true'} onChange={(e) => set('require_expiration')(String(e.target.checked))} /> Require an expiry</label>
          <Field label="Maximum lifetime (days, empty: none)" name="max_lifetime_days" value={values.max_lifetime_days} onChange={set('max_lifetime_days')} inputMode="numeric" />
          <Field label="Warn this many days before expiry" name="warn_days_before" value={values.warn_days_before} onChange={set('warn_days_before')} inputMode="numeric" />
          <Field label="Revoke after this many days unused" name="inactivity_days" value={values.inactivity_days} onChange={set('inactivity_days')} inputMode="numeric" />
        </fieldset>
        <ErrorBox error={error} />
        {saved && <p role="status" className="ok">Policy saved.</p>}
        {editable && <button type="submit" disabled={busy}>Save policy</button>}
      </form>
    </main>
  );
}

function CreateKeyForm({ onCreated }: { onCreated(key: CreatedKey): void }) {
  const { me } = useSession();
  const [name, setName] = useState('');
  const [expires, setExpires] = useState('');
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const { busy, error, run } = useAction();
  const sudo = useSudo();
  const policy = useLoad(() => unwrap(client.GET('/api/v1/organization/api-key-policy')).catch(() => undefined));
  const own = me?.scopes ?? [];
  const toggle = (scope: string) => {
    const next = new Set(picked);
    if (next.has(scope)) next.delete(scope);
    else next.add(scope);
    setPicked(next);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const body = { name, scopes: [...picked], ...(expires ? { expires_at: new Date(expires).toISOString() } : {}) };
      onCreated(await sudo.send((proof) => unwrap(client.POST('/api/v1/api-keys', { body: { ...body, ...proof } }))));
      setName('');
      setPicked(new Set());
    });
  };
  const limits = keyLimits(policy.data);
  return (
    <form onSubmit={submit} aria-label="Create an API key">
      <h2>Create a key</h2>
      <Field label="Key name" name="key-name" value={name} onChange={setName} required />
      <div className="field">
        <label htmlFor="key-expires">{limits.required ? 'Expires' : 'Expires (optional)'}</label>
        <input id="key-expires" name="expires" type="date" value={expires} max={limits.maxDate} required={limits.required} onChange={(e) => setExpires(e.target.value)} />
      </div>
      {limits.text && <p className="hint">{limits.text}</p>}
      <fieldset>
        <legend>Scopes (from your own)</legend>
        {wildcardOptions(me?.role ?? '', own).length > 0 && (
          <div className="scope-group">
            <h3>Wildcards</h3>
            {wildcardOptions(me?.role ?? '', own).map((s) => (
              <label key={s} className="check">
                <input type="checkbox" checked={picked.has(s)} onChange={() => toggle(s)} /> {s}
              </label>
            ))}
          </div>
        )}
        {groupScopes(own).map((group) => (
          <div key={group.category} className="scope-group">
            <h3>{group.category}</h3>
            {group.scopes.map((s) => (
              <label key={s} className="check">
                <input type="checkbox" checked={picked.has(s)} onChange={() => toggle(s)} /> {s}
              </label>
            ))}
          </div>
        ))}
      </fieldset>
      <SudoErrorBox error={error} />
      <SudoPrompt sudo={sudo} what="create this key" />
      <button type="submit" disabled={busy || picked.size === 0 || (sudo.asked && !sudo.hasPassword)}>Create key</button>
    </form>
  );
}

const ROLE_RANK: Record<string, number> = { member: 0, manager: 1, admin: 2, owner: 3 };

export function ApiKeysPage() {
  const { can, me } = useSession();
  const keys = usePagedLoad((cursor) => unwrap(client.GET('/api/v1/api-keys', { params: { query: { limit: 100, cursor } } })));
  // Admins and owners see the organization's keys: whose each is, and only those they may revoke get the button
  // (the API refuses a key of someone whose role is above yours: an admin, the owner's).
  const seesOthers = (ROLE_RANK[me?.role ?? ''] ?? 0) >= ROLE_RANK.admin;
  // Every member (all pages): a key's owner may be anyone in the organization.
  const members = useLoad(() =>
    seesOthers && can('members:read')
      ? loadAllPages((cursor) => unwrap(client.GET('/api/v1/members', { params: { query: { limit: 100, cursor } } })))
      : Promise.resolve(undefined),
  );
  const people = new Map<string | undefined, { email?: string; role?: string }>((members.data?.data ?? []).map((m) => [m.user_id, m]));
  const ownerOf = (userId?: string) => (userId === me?.user?.id ? 'you' : (people.get(userId)?.email ?? userId ?? ''));
  // Someone not (yet) looked up is not assumed to rank below you: no Revoke until their role is known.
  const mayRevoke = (userId?: string) => {
    if (userId === me?.user?.id) return true;
    const role = people.get(userId)?.role;
    return role !== undefined && (ROLE_RANK[role] ?? 4) <= (ROLE_RANK[me?.role ?? ''] ?? 0);
  };
  const [created, setCreated] = useState<CreatedKey | null>(null);
  const revoke = useAction();
  const revokeKey = (id: string, name: string) => {
    if (!window.confirm(`Revoke the key "${name}"? Programs using it stop working at once.`)) return;
    void revoke.run(async () => {
      await unwrap(client.DELETE('/api/v1/api-keys/{id}', { params: { path: { id } } }));
      keys.reload();
    });
  };
  return (
    <main>
      <h1>API keys</h1>
      {can('org:read') && <p><Link to="/settings/api-key-policy">Organization key policy</Link></p>}
      {created?.key && <OnceSecret label={`New key "${created.name}"`} value={created.key} />}
      <ErrorBox error={keys.error ?? revoke.error ?? members.error} />
      <table>
        <thead>
          <tr>
            <th>Name</th>
            {seesOthers && <th>Owner</th>}
            <th>Prefix</th>
            <th>Scopes</th>
            <th>Expires</th>
            <th>Last used</th>
            <th>Status</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {keys.data?.data?.map((k) => (
            <tr key={k.id}>
              <td>{k.name}</td>
              {seesOthers && <td>{ownerOf(k.user_id)}</td>}
              <td><code>{k.prefix}</code></td>
              <td>{k.scopes?.join(', ')}</td>
              <td><When at={k.expires_at} /></td>
              <td><When at={k.last_used_at} /></td>
              <td>{k.revoked_at ? 'revoked' : 'active'}</td>
              <td>
                {!k.revoked_at && can('api_keys:revoke') && mayRevoke(k.user_id) && (
                  <button type="button" onClick={() => revokeKey(k.id!, k.name!)}>Revoke {k.name}</button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <ShowMore list={keys} what="API keys" />
      {can('api_keys:create') && (
        <CreateKeyForm
          onCreated={(key) => {
            setCreated(key);
            keys.reload();
          }}
        />
      )}
    </main>
  );
}
