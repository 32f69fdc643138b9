import Joi from 'joi';
import { ALL_SCOPES, ROLES } from '@svc/scopes';
import { email, name, password } from '../../http/validate';
import { id, timestamp } from '../../http/responses';
import { RECENT_SIGN_IN_WINDOW_MS } from './reauthentication';

/** Signup, and the CLI's create-owner (same rules: same schema). */
export const signupBody = Joi.object({
  email: email().required(),
  password: password().required(),
  name: name().required(),
  organization_name: name().required(),
});

export const verifyEmailBody = Joi.object({
  token: Joi.string().max(200).required(),
  // The password chosen at signup: the link alone proves the address, not that its holder is the one who signed up.
  password: password().min(1).required(),
});

// At login the password only has to be present (older accounts may predate the length rule), but it is still
// refused past 72 bytes rather than letting bcrypt silently compare a truncated value.
export const loginBody = Joi.object({
  email: email().required(),
  password: password().min(1).required(),
  organization_id: Joi.string().max(100),
});

const totpCode = () => Joi.string().trim().pattern(/^\d{6}$/).messages({ 'string.pattern.base': '{{#label}} must be 6 digits' });

export const login2faBody = Joi.object({
  // Absent: the partial_token cookie the OAuth callback set for the dashboard (httpOnly, this route only).
  partial_token: Joi.string().max(4096),
  code: totpCode().required(),
});

export const changePasswordBody = Joi.object({
  // Only present: an older password may predate the length rule.
  current_password: password().min(1).required(),
  new_password: password().required(),
});

/** Turning 2FA on or off: a code, and the caller proves again who they are (reauthentication.ts). */
export const twoFactorChangeBody = Joi.object({
  code: totpCode().required(),
  // Only present, like the password change's: an older password may predate the length rule.
  current_password: password()
    .min(1)
    .description(
      `Required when the account has a password (has_password in GET /auth/me); an account without one needs a session signed in within the last ${
        RECENT_SIGN_IN_WINDOW_MS / 60_000
      } minutes instead`,
    ),
});

/**
 * The current password confirming a sudo-mode change (an API key, an invitation, a raised role, the organization's
 * deletion or transfer, a webhook's creation, new URL, re-enabling or secret rotation) from a session signed in longer
 * ago than the window (reauthentication.ts confirmSensitiveChange).
 */
export const sensitiveChangePassword = () =>
  password()
    .min(1)
    .description(
      `Needed from a session signed in more than ${RECENT_SIGN_IN_WINDOW_MS / 60_000} minutes ago (else 403 REAUTHENTICATION_REQUIRED); never stored or logged; not asked of API keys`,
    );

export const passwordResetRequestBody = Joi.object({
  email: email().required(),
});

export const passwordResetConfirmBody = Joi.object({
  // The token from the link of the reset mail (its URL fragment).
  token: Joi.string().max(200).required(),
  // The rules of signup and of a change of password.
  new_password: password().required(),
  // A current TOTP code: required when the account has two-factor authentication on.
  code: totpCode(),
});

// ---------------------------------------------------------------------------------------------------------
// Response shapes

const jwt = () => Joi.string().pattern(/^[\w-]+\.[\w-]+\.[\w-]+$/, 'JWT');

export const signupResponse = Joi.object({
  user_id: id('usr'),
  organization_id: id('org'),
  status: Joi.string().valid('pending'),
});

export const verifyEmailResponse = Joi.object({ status: Joi.string().valid('active') });

export const declineSignupBody = Joi.object({ token: Joi.string().max(200).required() });
export const declineSignupResponse = Joi.object({ signup_removed: Joi.boolean().valid(true) });

/** A signed-in session: the bearer token (also set as the httpOnly `session` cookie) and its CSRF token. */
export const issuedSessionResponse = Joi.object({
  token: jwt(),
  expires_at: timestamp(),
  csrf_token: Joi.string().pattern(/^[0-9a-f]{64}$/, 'hex HMAC'),
});

/** The first factor passed but the user has TOTP on: exchange the partial token at POST /auth/login/2fa. */
export const twoFactorRequiredResponse = Joi.object({
  requires_2fa: Joi.boolean().valid(true),
  partial_token: jwt(),
});

export const loginResponse = Joi.alternatives().try(issuedSessionResponse, twoFactorRequiredResponse);

export const meResponse = Joi.object({
  user: Joi.object({
    id: id('usr'),
    email: Joi.string().email({ tlds: false }),
    name: Joi.string(),
    two_factor_enabled: Joi.boolean(),
    has_password: Joi.boolean().description('false: the account signs in with GitHub or Google only (no password to change or confirm with)'),
  }),
  organization: Joi.object({ id: id('org'), name: Joi.string() }),
  role: Joi.string().valid(...ROLES),
  credential: Joi.alternatives().try(
    Joi.object({ type: Joi.string().valid('api_key'), key_prefix: Joi.string().pattern(/^sk-svc-/) }),
    Joi.object({ type: Joi.string().valid('session') }),
  ),
  scopes: Joi.array().items(Joi.string().valid(...ALL_SCOPES)),
});

export const twoFactorSetupResponse = Joi.object({
  secret: Joi.string().pattern(/^[A-Z2-7]{16,}$/, 'base32'),
  otpauth_url: Joi.string().pattern(/^otpauth:\/\/totp\//, 'otpauth URL'),
});

export const twoFactorEnabledResponse = Joi.object({ two_factor_enabled: Joi.boolean().valid(true) });

export const twoFactorDisabledResponse = Joi.object({ two_factor_enabled: Joi.boolean().valid(false) });

/** The same answer whatever the e-mail names: an active account, a pending one, or none. */
export const passwordResetRequestedResponse = Joi.object({ accepted: Joi.boolean().valid(true) });

export const passwordResetResponse = Joi.object({ password_reset: Joi.boolean().valid(true), sessions_revoked: Joi.boolean().valid(true) });

export const passwordChangedResponse = Joi.object({ password_changed: Joi.boolean().valid(true), other_sessions_revoked: Joi.boolean().valid(true) });
