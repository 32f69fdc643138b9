// Sudo mode (docs/api.md, "Sensitive changes"): minting an API key, inviting, raising a role, transferring ownership,
// a webhook's creation, new URL, re-enabling or secret rotation, a notification target's creation, new URL or
// recipient or re-enabling, publishing or sharing a report, and a new issue tracker or integration, from a session
// signed in more than 10 minutes ago, need the password. The page sends the change as it is; only when the API asks for
// the password (REAUTHENTICATION_REQUIRED, or INVALID_CURRENT_PASSWORD after a wrong one) does it show a password
// field, or for an account without a password a Sign in again link, and the next submit sends the same change with
// the password. The password is cleared from the page as soon as it is sent.
import { useState, type FormEvent } from 'react';
import { Link, useLocation } from 'react-router-dom';
import { ApiError } from '../api/client';
import { useSession } from './session';
import { ErrorBox, Field } from './ui';

const ASKS_FOR_PASSWORD = new Set(['REAUTHENTICATION_REQUIRED', 'INVALID_CURRENT_PASSWORD']);

function asksForPassword(error: unknown): boolean {
  return error instanceof ApiError && error.code !== undefined && ASKS_FOR_PASSWORD.has(error.code);
}

export interface Sudo {
  /** Makes the change; the password goes with it once the API has asked for it. */
  send<T>(call: (proof: { current_password?: string }) => Promise<T>): Promise<T>;
  /** The API asked for the password (or a new sign-in): the prompt is showing. */
  asked: boolean;
  hasPassword: boolean;
  password: string;
  setPassword(value: string): void;
  cancel(): void;
}

export function useSudo(): Sudo {
  const { me } = useSession();
  const hasPassword = me?.user?.has_password !== false;
  const [asked, setAsked] = useState(false);
  const [password, setPassword] = useState('');
  const send = async <T,>(call: (proof: { current_password?: string }) => Promise<T>): Promise<T> => {
    const proof = asked && hasPassword && password !== '' ? { current_password: password } : {};
    setPassword('');
    try {
      const result = await call(proof);
      setAsked(false);
      return result;
    } catch (err) {
      if (asksForPassword(err)) setAsked(true);
      throw err;
    }
  };
  const cancel = () => {
    setAsked(false);
    setPassword('');
  };
  return { send, asked, hasPassword, password, setPassword, cancel };
}

/**
 * The error of a sudo-mode change: the API's request for the password is answered by the prompt, not shown as an
 * error (its text speaks to API clients); a wrong password and any other error are shown as they are.
 */
export function SudoErrorBox({ error }: { error: unknown }) {
  if (error instanceof ApiError && error.code === 'REAUTHENTICATION_REQUIRED') return null;
  return <ErrorBox error={error} />;
}

/** The password field (or the Sign in again link) shown once the API has asked; `what` completes "…to <what>". */
export function SudoPrompt({ sudo, what }: { sudo: Sudo; what: string }) {
  const location = useLocation();
  if (!sudo.asked) return null;
  if (!sudo.hasPassword) {
    return (
      <p role="alert">
        You signed in more than 10 minutes ago. <Link to={`/login?next=${encodeURIComponent(location.pathname)}`}>Sign in again</Link>{' '}
        (with GitHub or Google), then {what}.
      </p>
    );
  }
  return (
    <>
      <p className="hint">You signed in more than 10 minutes ago: confirm with your password to {what}.</p>
      <Field
        label="Confirm with your password"
        name="sudo-password"
        type="password"
        value={sudo.password}
        onChange={sudo.setPassword}
        autoComplete="current-password"
        required
      />
    </>
  );
}

/** A change started from a button (a role, a transfer, an enable, a rotation) that the API may ask to confirm. */
export interface SudoChange {
  /** The confirmation form's accessible name. */
  form: string;
  /** Completes "confirm with your password to <what>". */
  what: string;
  /** The confirmation form's button. */
  submit: string;
  send(proof: { current_password?: string }): Promise<unknown>;
}

/**
 * Sends a button's change as it is; if the API asks for the password, the change waits (with the target it was
 * started for) in <SudoConfirmation> until it is sent again with the password or cancelled. Starting another change
 * drops the waiting one.
 */
export function useSudoChange(run: (action: () => Promise<void>) => Promise<void>, afterDone: () => void) {
  const sudo = useSudo();
  const [pending, setPending] = useState<SudoChange | null>(null);
  const send = (change: SudoChange) =>
    void run(async () => {
      setPending(change);
      await sudo.send(change.send);
      setPending(null);
      afterDone();
    });
  const start = (change: SudoChange) => {
    sudo.cancel();
    send(change);
  };
  const confirm = (e: FormEvent) => {
    e.preventDefault();
    if (pending) send(pending);
  };
  const cancel = () => {
    sudo.cancel();
    setPending(null);
  };
  return { sudo, pending, start, confirm, cancel };
}

export function SudoConfirmation({ change, busy }: { change: ReturnType<typeof useSudoChange>; busy: boolean }) {
  if (!change.pending || !change.sudo.asked) return null;
  return (
    <form onSubmit={change.confirm} aria-label={change.pending.form}>
      <SudoPrompt sudo={change.sudo} what={change.pending.what} />
      {change.sudo.hasPassword && (
        <button type="submit" disabled={busy}>
          {change.pending.submit}
        </button>
      )}
      <button type="button" onClick={change.cancel}>Cancel</button>
    </form>
  );
}
