// Sudo mode (docs/api.md, "Sensitive changes"): minting an API key or transferring ownership from a session signed
// in more than 10 minutes ago needs the password. The page sends the change as it is; only when the API asks for
// the password (REAUTHENTICATION_REQUIRED, or INVALID_CURRENT_PASSWORD after a wrong one) does it show a password
// field, or for an account without a password a Sign in again link, and the next submit sends the same change with
// the password. The password is cleared from the page as soon as it is sent.
import { useState } from 'react';
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
