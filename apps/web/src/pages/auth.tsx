// Sign up, e-mail verification, log in (password, then TOTP when the account has it), a forgotten password (ask for a
// reset link, then set a new password with it), invitation acceptance.
import { useEffect, useState, type FormEvent } from 'react';
import { Link, useLocation, useNavigate, useSearchParams } from 'react-router-dom';
import { ApiError, client, unwrap } from '../api/client';
import { useSession } from '../lib/session';
import { ErrorBox, Field, useAction, useLoad } from '../lib/ui';

/**
 * Only same-site relative paths are followed after login, else '/'. Browsers read a backslash as a slash (`/\host` is
 * `//host`, another site) and drop tabs and line breaks inside URLs: a `next` holding either is not taken.
 */
function safeNext(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') && !/[\\\u0000-\u001f\u007f]/.test(next) ? next : '/';
}

export function LoginPage() {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const { refresh } = useSession();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  // The partial token lives in this component's state only, for the TOTP step.
  const [partialToken, setPartialToken] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const providers = useLoad(() => unwrap(client.GET('/api/v1/auth/providers')));
  const next = safeNext(params.get('next'));
  const passwordReset = (useLocation().state as { passwordReset?: boolean } | null)?.passwordReset === true;

  const finish = async () => {
    setPartialToken(null);
    await refresh();
    navigate(next, { replace: true });
  };

  const submitPassword = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const result = await unwrap(client.POST('/api/v1/auth/login', { body: { email, password } }), { quiet401: true });
      if ('requires_2fa' in result && result.requires_2fa) setPartialToken(result.partial_token ?? null);
      else await finish();
    });
  };

  if (partialToken) return <TotpStep partialToken={partialToken} onDone={finish} />;
  return (
    <main className="narrow">
      <h1>Log in</h1>
      {passwordReset && (
        <p role="status" className="ok">
          Your password was reset and all your sessions were signed out. Log in with the new password.
        </p>
      )}
      <form onSubmit={submitPassword}>
        <Field label="E-mail" name="email" type="email" value={email} onChange={setEmail} autoComplete="username" required />
        <Field label="Password" name="password" type="password" value={password} onChange={setPassword} autoComplete="current-password" required />
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>Log in</button>
      </form>
      <p>
        <Link to="/forgot-password">Forgot password?</Link>
      </p>
      {providers.data?.oauth.map((p) => (
        <p key={p}>
          <a className="button" href={`/api/v1/auth/oauth/${p}/start?redirect_after=${encodeURIComponent(next)}`}>
            Continue with {p === 'github' ? 'GitHub' : 'Google'}
          </a>
        </p>
      ))}
      <p>
        No account? <Link to="/signup">Sign up</Link>
      </p>
    </main>
  );
}

/**
 * The TOTP step. After a password login the partial token comes from this page's state; after an OAuth sign-in
 * it is in an httpOnly cookie the API set for POST /auth/login/2fa only (this page never sees it), and the
 * exchange that spends it also clears it.
 */
function TotpStep({ partialToken, onDone }: { partialToken?: string; onDone(): Promise<void> }) {
  const [code, setCode] = useState('');
  const { busy, error, run } = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const body = partialToken ? { partial_token: partialToken, code } : { code };
      await unwrap(client.POST('/api/v1/auth/login/2fa', { body }), { quiet401: true });
      await onDone();
    });
  };
  return (
    <main className="narrow">
      <h1>Two-factor authentication</h1>
      <form onSubmit={submit}>
        <Field label="Authentication code" name="code" value={code} onChange={setCode} inputMode="numeric" autoComplete="one-time-code" required />
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>Verify</button>
      </form>
      {error !== undefined && (
        <p>
          <Link to="/login">Start the login again</Link>
        </p>
      )}
    </main>
  );
}

/** Where the OAuth callback sends an account with TOTP on (/login/2fa?next=...). */
export function OAuthTotpPage() {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const { refresh } = useSession();
  const next = safeNext(params.get('next'));
  return (
    <TotpStep
      onDone={async () => {
        await refresh();
        navigate(next, { replace: true });
      }}
    />
  );
}

export function SignupPage() {
  const [form, setForm] = useState({ name: '', email: '', password: '', organization_name: '' });
  const [done, setDone] = useState(false);
  const { busy, error, run } = useAction();
  const set = (key: keyof typeof form) => (value: string) => setForm({ ...form, [key]: value });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      await unwrap(client.POST('/api/v1/auth/signup', { body: form }));
      setDone(true);
    });
  };
  if (done) {
    return (
      <main className="narrow">
        <h1>Check your e-mail</h1>
        <p role="status">We sent a verification link to {form.email}. Open it to activate your account.</p>
      </main>
    );
  }
  return (
    <main className="narrow">
      <h1>Sign up</h1>
      <form onSubmit={submit}>
        <Field label="Your name" name="name" value={form.name} onChange={set('name')} autoComplete="name" required />
        <Field label="E-mail" name="email" type="email" value={form.email} onChange={set('email')} autoComplete="email" required />
        <Field label="Password (at least 10 characters)" name="password" type="password" value={form.password} onChange={set('password')} autoComplete="new-password" required />
        <Field label="Organization name" name="organization_name" value={form.organization_name} onChange={set('organization_name')} required />
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>Create account</button>
      </form>
      <p>
        Already registered? <Link to="/login">Log in</Link>
      </p>
    </main>
  );
}

/** Asks for a reset link. The answer is the same whether or not the address has an account: so is the message. */
export function ForgotPasswordPage() {
  const [email, setEmail] = useState('');
  const [sent, setSent] = useState(false);
  const { busy, error, run } = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      await unwrap(client.POST('/api/v1/auth/password-reset', { body: { email } }));
      setSent(true);
    });
  };
  if (sent) {
    return (
      <main className="narrow">
        <h1>Check your e-mail</h1>
        <p role="status">
          If an account with the address {email} exists, we sent it a link to reset the password. The link works once,
          within 30 minutes; only the newest link works.
        </p>
        <Link to="/login">Back to log in</Link>
      </main>
    );
  }
  return (
    <main className="narrow">
      <h1>Forgot password</h1>
      <form onSubmit={submit} aria-label="Forgot password">
        <Field label="E-mail" name="email" type="email" value={email} onChange={setEmail} autoComplete="username" required />
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>Send reset link</button>
      </form>
      <p>
        <Link to="/login">Back to log in</Link>
      </p>
    </main>
  );
}

/** The token of the reset link: in the URL fragment (#token=...), which the browser never sends to a server. */
function tokenFromFragment(): string | null {
  return new URLSearchParams(window.location.hash.slice(1)).get('token');
}

/**
 * Sets a new password with the link of the reset mail. The token is taken from the fragment once and the fragment
 * removed from the address bar (and this history entry); the code field appears when the API asks for it (2FA on).
 */
export function ResetPasswordPage() {
  const navigate = useNavigate();
  const [token] = useState(tokenFromFragment);
  const [fields, setFields] = useState({ next: '', confirmation: '', code: '' });
  const [needsCode, setNeedsCode] = useState(false);
  const { busy, error, run } = useAction();
  useEffect(() => {
    if (window.location.hash) window.history.replaceState(window.history.state, '', window.location.pathname + window.location.search);
  }, []);
  const set = (key: keyof typeof fields) => (value: string) => setFields({ ...fields, [key]: value });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      if (fields.next !== fields.confirmation) throw new Error('The new password and its confirmation do not match.');
      const body = { token: token!, new_password: fields.next, ...(needsCode && { code: fields.code }) };
      try {
        await unwrap(client.POST('/api/v1/auth/password-reset/confirm', { body }), { quiet401: true });
      } catch (err) {
        if (err instanceof ApiError && err.code === 'TOTP_REQUIRED') {
          setNeedsCode(true);
          throw new Error('Your account has two-factor authentication on: enter a current code from your authenticator app.');
        }
        throw err;
      }
      navigate('/login', { replace: true, state: { passwordReset: true } });
    });
  };
  if (!token) {
    return (
      <main className="narrow">
        <h1>Reset password</h1>
        <p role="alert" className="error">
          This page needs the link from the password-reset e-mail. Open the link again, or ask for a new one.
        </p>
        <Link to="/forgot-password">Ask for a new link</Link>
      </main>
    );
  }
  return (
    <main className="narrow">
      <h1>Reset password</h1>
      <form onSubmit={submit} aria-label="Reset password">
        <Field label="New password" name="new-password" type="password" value={fields.next} onChange={set('next')} autoComplete="new-password" required />
        <Field label="Confirm new password" name="confirm-new-password" type="password" value={fields.confirmation} onChange={set('confirmation')} autoComplete="new-password" required />
        {needsCode && (
          <Field label="Authentication code" name="code" value={fields.code} onChange={set('code')} inputMode="numeric" autoComplete="one-time-code" required />
        )}
        <p className="hint">At least 10 characters, at most 72 bytes. All your sessions are signed out; API keys stay.</p>
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>Set new password</button>
      </form>
      {error instanceof ApiError && (
        <p>
          <Link to="/forgot-password">Ask for a new link</Link>
        </p>
      )}
    </main>
  );
}

/**
 * The link from the signup mail and the password chosen at signup: the link alone activates nothing, so a person who
 * receives the mail of a signup someone else made with their address cannot be made to activate it.
 */
export function VerifyEmailPage() {
  const [params] = useSearchParams();
  const token = params.get('token') ?? '';
  const [password, setPassword] = useState('');
  const [done, setDone] = useState<'verified' | 'removed' | null>(null);
  const { busy, error, run } = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      await unwrap(client.POST('/api/v1/auth/verify-email', { body: { token, password } }), { quiet401: true });
      setDone('verified');
    });
  };
  const decline = () => {
    if (
      !window.confirm(
        'Remove the account someone made with your address? If you signed up yourself, this removes your signup, and signing up again with a password is possible only after 24 hours (GitHub or Google sign-in works at once).',
      )
    )
      return;
    void run(async () => {
      await unwrap(client.POST('/api/v1/auth/verify-email/decline', { body: { token } }), { quiet401: true });
      setDone('removed');
    });
  };
  if (done) {
    const outcome =
      done === 'verified'
        ? 'Your e-mail address is verified. You can log in now.'
        : 'The account someone made with your address is removed. For 24 hours nobody can sign up with it using a password; signing in with GitHub or Google, or an invitation, still works.';
    return (
      <main className="narrow">
        <h1>E-mail verification</h1>
        <p role="status" className="ok">{outcome}</p>
        <Link to="/login">Go to log in</Link>
      </main>
    );
  }
  return (
    <main className="narrow">
      <h1>E-mail verification</h1>
      {!token ? (
        <p role="alert" className="error">This page needs the link from the verification e-mail. Open the link again.</p>
      ) : (
        <>
          <form onSubmit={submit} aria-label="Verify e-mail address">
            <p>Enter the password you chose when you signed up.</p>
            <Field label="Your password" name="password" type="password" value={password} onChange={setPassword} autoComplete="current-password" required />
            <ErrorBox error={error} />
            <button type="submit" disabled={busy}>Verify</button>
          </form>
          <p className="hint">
            Did not sign up? Someone gave your address: do not type a password they gave you. Remove their account instead.
          </p>
          <button type="button" className="danger" disabled={busy} onClick={decline}>I did not sign up: remove this account</button>
        </>
      )}
    </main>
  );
}

export function AcceptInvitePage() {
  const [params] = useSearchParams();
  const token = params.get('token') ?? '';
  const [existing, setExisting] = useState(false);
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [accepted, setAccepted] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const body = existing ? { token, password } : { token, name, password };
      const result = await unwrap(client.POST('/api/v1/invitations/accept', { body }), { quiet401: true });
      setAccepted(`You joined ${result.organization?.name} as ${result.role}. You can log in now.`);
    });
  };
  if (accepted) {
    return (
      <main className="narrow">
        <h1>Invitation accepted</h1>
        <p role="status" className="ok">{accepted}</p>
        <Link to="/login">Go to log in</Link>
      </main>
    );
  }
  return (
    <main className="narrow">
      <h1>Accept the invitation</h1>
      <form onSubmit={submit}>
        <div className="field">
          <label>
            <input type="checkbox" checked={existing} onChange={(e) => setExisting(e.target.checked)} /> I already have an account
          </label>
        </div>
        {!existing && <Field label="Your name" name="name" value={name} onChange={setName} autoComplete="name" required />}
        <Field
          label={existing ? 'Your current password' : 'Choose a password (at least 10 characters)'}
          name="password"
          type="password"
          value={password}
          onChange={setPassword}
          autoComplete={existing ? 'current-password' : 'new-password'}
          required
        />
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>Accept invitation</button>
      </form>
    </main>
  );
}
