// Driving the service's OAuth routes as a browser would: start (the 302 to the provider and the flow cookie),
// then the callback with what the provider sent back and the cookie.
import request from 'supertest';
import { sha256Hex } from '../../src/lib/crypto';
import type { Harness } from './harness';
import { bearer } from './fixtures';
import { oathtoolCode, setCookies } from './auth-helpers';

/** PUBLIC_BASE_URL of the OAuth tests: the redirect URIs registered at the loopback providers derive from it. */
export const APP_BASE_URL = 'http://app.test';
export const redirectUriOf = (provider: string) => `${APP_BASE_URL}/api/v1/auth/oauth/${provider}/callback`;

export interface Started {
  /** Where the service sent the browser. */
  location: URL;
  /** The flow cookie's value. */
  flowId: string;
  cookie: { value: string; attributes: Map<string, string> };
  response: request.Response;
}

export async function startFlow(h: Harness, provider: string, query: Record<string, string> = {}): Promise<Started> {
  const response = await request(h.app).get(`/api/v1/auth/oauth/${provider}/start`).query(query);
  if (response.status !== 302) throw new Error(`start answered ${response.status}: ${JSON.stringify(response.body)}`);
  const cookie = setCookies(response).get(`oauth_${provider}`);
  if (!cookie) throw new Error('start set no flow cookie');
  return { location: new URL(response.headers.location), flowId: cookie.value, cookie, response };
}

/** GET the service's callback at the path and query of `callbackUrl` (what the provider redirected to). */
export function callback(h: Harness, provider: string, callbackUrl: URL | string, flowId?: string) {
  const url = typeof callbackUrl === 'string' ? new URL(callbackUrl, APP_BASE_URL) : callbackUrl;
  if (!url.toString().startsWith(redirectUriOf(provider))) throw new Error(`not our callback: ${url}`);
  const req = request(h.app).get(url.pathname + url.search);
  if (flowId !== undefined) req.set('Cookie', `oauth_${provider}=${flowId}`);
  return req;
}

export const flowRedisKey = (h: Harness, flowId: string) => `${h.config.redisPrefix}:oauth-flow:${sha256Hex(flowId)}`;

export function me(h: Harness, token: string) {
  return request(h.app).get('/api/v1/auth/me').set(bearer(token));
}

/**
 * Turns TOTP on for the session's user through the API; returns the secret. `currentPassword`: the account's
 * password (an account without one, made by a provider sign-in, turns it on from a recent sign-in instead).
 */
export async function enableTotp(h: Harness, token: string, currentPassword?: string): Promise<string> {
  const setup = await request(h.app).post('/api/v1/auth/2fa/setup').set(bearer(token));
  if (setup.status !== 200) throw new Error(`2fa setup: ${setup.status}`);
  const enable = await request(h.app)
    .post('/api/v1/auth/2fa/enable')
    .set(bearer(token))
    .send({ code: oathtoolCode(setup.body.secret, h.clock.now()), ...(currentPassword !== undefined && { current_password: currentPassword }) });
  if (enable.status !== 200) throw new Error(`2fa enable: ${enable.status} ${JSON.stringify(enable.body)}`);
  return setup.body.secret;
}
