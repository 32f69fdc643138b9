import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RateLimiters } from '../../http/rate-limit';
import type { RouteSpec } from '../../http/route';
import {
  changePasswordBody,
  declineSignupBody,
  declineSignupResponse,
  issuedSessionResponse,
  login2faBody,
  loginBody,
  loginResponse,
  meResponse,
  passwordChangedResponse,
  passwordResetConfirmBody,
  passwordResetRequestBody,
  passwordResetRequestedResponse,
  passwordResetResponse,
  signupBody,
  signupResponse,
  twoFactorChangeBody,
  twoFactorDisabledResponse,
  twoFactorEnabledResponse,
  twoFactorSetupResponse,
  verifyEmailBody,
  verifyEmailResponse,
} from './auth.schemas';
import { declineSignup, signup, verifyEmail } from './accounts';
import { dummyPasswordHash, login, logout } from './login';
import { LOGIN_DEVICE_COOKIE, rememberLoginDevice } from './login-devices';
import { changePassword } from './password';
import { confirmPasswordReset, requestPasswordReset } from './password-reset';
import { describePrincipal } from './profile';
import { disableTwoFactor, enableTwoFactor, setupTwoFactor } from './two-factor';
import { loginWithSecondFactor } from './two-factor-login';
import { requestMeta } from '../audit/audit.context';
import { badRequest } from '../../http/errors';
import { clearPartialTokenCookie, clearSessionCookies, PARTIAL_COOKIE, sessionResponse, setSessionCookies } from './sessions';

export function authRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  // Warm the dummy hash so the first unknown-e-mail login costs what a wrong password costs.
  dummyPasswordHash(deps.config.bcryptRounds).catch(() => undefined);
  const secure = deps.config.cookieSecure;

  return [
    {
      method: 'post',
      path: '/auth/signup',
      scope: 'public',
      summary: 'Create a pending user who owns a new organization; mails a verification link',
      schemas: { body: signupBody },
      status: 201,
      response: signupResponse,
      handler: (req) => signup(deps, req.body),
    },
    {
      method: 'post',
      path: '/auth/verify-email',
      scope: 'public',
      summary:
        'Activate a pending user with the token from the verification e-mail and the password chosen at signup (a wrong password leaves the link unused)',
      schemas: { body: verifyEmailBody },
      response: verifyEmailResponse,
      handler: (req) => verifyEmail(deps, limiters, req.body, requestMeta(req)),
    },
    {
      method: 'post',
      path: '/auth/verify-email/decline',
      scope: 'public',
      summary:
        "\"I did not sign up\": with the token from the verification e-mail, removes the pending account someone made with the address (and its organization); password signups with the address are then refused for 24 hours",
      schemas: { body: declineSignupBody },
      response: declineSignupResponse,
      handler: (req) => declineSignup(deps, req.body.token),
    },
    {
      method: 'post',
      path: '/auth/login',
      scope: 'public',
      summary: 'Password login: a session (token and cookies), or a partial token when 2FA is on',
      schemas: { body: loginBody },
      response: loginResponse,
      handler: async (req, res) => {
        const outcome = await login(deps, limiters, req.body, requestMeta(req), req.cookies?.[LOGIN_DEVICE_COOKIE]);
        if (outcome.kind === 'two_factor') return { requires_2fa: true, partial_token: outcome.partialToken };
        rememberLoginDevice(res, deps, { email: req.body.email, passwordHash: outcome.passwordHash });
        setSessionCookies(res, outcome.session, secure);
        return sessionResponse(outcome.session);
      },
    },
    {
      method: 'post',
      path: '/auth/login/2fa',
      scope: 'public',
      summary:
        'Exchange a partial token and a TOTP code for a session (the token from the body, else from the httpOnly cookie an OAuth sign-in set)',
      schemas: { body: login2faBody },
      response: issuedSessionResponse,
      handler: async (req, res) => {
        const fromCookie: unknown = req.cookies?.[PARTIAL_COOKIE];
        const partialToken = (req.body.partial_token as string | undefined) ?? (typeof fromCookie === 'string' ? fromCookie : undefined);
        if (!partialToken) throw badRequest('"partial_token" is required (in the body, or the cookie an OAuth sign-in sets).');
        const { session, signedIn } = await loginWithSecondFactor(deps, limiters, { partial_token: partialToken, code: req.body.code }, requestMeta(req));
        if (fromCookie !== undefined) clearPartialTokenCookie(res, { publicBaseUrl: deps.config.publicBaseUrl, secure });
        rememberLoginDevice(res, deps, signedIn);
        setSessionCookies(res, session, secure);
        return sessionResponse(session);
      },
    },
    {
      method: 'post',
      path: '/auth/logout',
      scope: 'profile:update',
      summary: 'Revoke the current session and clear its cookies',
      handler: async (req, res) => {
        await logout(deps, principalOf(req), requestMeta(req));
        clearSessionCookies(res, secure);
        return undefined;
      },
    },
    {
      method: 'get',
      path: '/auth/me',
      scope: 'profile:read',
      summary: 'The caller: user, organization, role, credential and effective scopes',
      response: meResponse,
      handler: (req) => describePrincipal(deps, principalOf(req)),
    },
    {
      method: 'post',
      path: '/auth/password',
      scope: 'profile:update',
      summary: "Change the caller's password: {current_password, new_password}; the account's other sessions end (a session only)",
      schemas: { body: changePasswordBody },
      response: passwordChangedResponse,
      handler: async (req, res) => {
        const { answer, signedIn } = await changePassword(deps, limiters, principalOf(req), req.body, requestMeta(req));
        // The browser that changed it is known with the new password (the cookies earned with the old one count as none).
        rememberLoginDevice(res, deps, signedIn);
        return answer;
      },
    },
    {
      method: 'post',
      path: '/auth/password-reset',
      scope: 'public',
      summary:
        'Ask for a password-reset link by e-mail: the same 202 whether or not an active account has this address (only an active one gets the mail)',
      schemas: { body: passwordResetRequestBody },
      status: 202,
      response: passwordResetRequestedResponse,
      handler: (req) => requestPasswordReset(deps, limiters, req.body.email, requestMeta(req)),
    },
    {
      method: 'post',
      path: '/auth/password-reset/confirm',
      scope: 'public',
      summary:
        "Set a new password with the token of the reset link (and a TOTP code when 2FA is on); every session of the account ends",
      schemas: { body: passwordResetConfirmBody },
      response: passwordResetResponse,
      handler: (req) => confirmPasswordReset(deps, limiters, req.body, requestMeta(req)),
    },
    {
      method: 'post',
      path: '/auth/2fa/setup',
      scope: 'profile:update',
      summary:
        'Start TOTP setup: a new secret and its otpauth URL (not active until enabled); an account without a password: a session from a recent sign-in, else 403 REAUTHENTICATION_REQUIRED',
      response: twoFactorSetupResponse,
      handler: (req) => setupTwoFactor(deps, principalOf(req)),
    },
    {
      method: 'post',
      path: '/auth/2fa/enable',
      scope: 'profile:update',
      summary:
        "Turn TOTP on with a code from the secret of the setup step and the current password (an account without one: a session from a recent sign-in, else 403 REAUTHENTICATION_REQUIRED); the account's other sessions end",
      schemas: { body: twoFactorChangeBody },
      response: twoFactorEnabledResponse,
      handler: (req) => enableTwoFactor(deps, limiters, principalOf(req), req.body, requestMeta(req)),
    },
    {
      method: 'post',
      path: '/auth/2fa/disable',
      scope: 'profile:update',
      summary:
        'Turn TOTP off with a current code and the current password (an account without one: a session from a recent sign-in, else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { body: twoFactorChangeBody },
      response: twoFactorDisabledResponse,
      handler: (req) => disableTwoFactor(deps, limiters, principalOf(req), req.body, requestMeta(req)),
    },
  ];
}
