// OAuth settings (packages/config) and the routes' answers for unknown and unconfigured providers.
import request from 'supertest';
import { ConfigError, loadConfig } from '@svc/config';
import { createHarness, type Harness } from './support/harness';

describe('OAuth settings', () => {
  it('disables both providers by default, with the real endpoints and a 10-minute state TTL', () => {
    const config = loadConfig({});
    expect(config.oauth).toEqual({ stateTtlSeconds: 600, httpTimeoutMs: 10_000, github: undefined, google: undefined });
    const enabled = loadConfig({ GITHUB_CLIENT_ID: 'gh-id', GITHUB_CLIENT_SECRET: 'gh-secret', GOOGLE_CLIENT_ID: 'g-id', GOOGLE_CLIENT_SECRET: 'g-secret' });
    expect(enabled.oauth.github).toEqual({
      clientId: 'gh-id',
      clientSecret: 'gh-secret',
      authorizeUrl: 'https://github.com/login/oauth/authorize',
      tokenUrl: 'https://github.com/login/oauth/access_token',
      apiBaseUrl: 'https://api.github.com',
    });
    expect(enabled.oauth.google).toEqual({ clientId: 'g-id', clientSecret: 'g-secret', issuerUrl: 'https://accounts.google.com' });
  });

  it('requires the client secret of an enabled provider, naming the setting', () => {
    expect(() => loadConfig({ GITHUB_CLIENT_ID: 'gh-id' })).toThrow(ConfigError);
    expect(() => loadConfig({ GITHUB_CLIENT_ID: 'gh-id' })).toThrow(/GITHUB_CLIENT_SECRET/);
    expect(() => loadConfig({ GOOGLE_CLIENT_ID: 'g-id', GOOGLE_CLIENT_SECRET: '' })).toThrow(/GOOGLE_CLIENT_SECRET/);
  });

  it('refuses malformed endpoint URLs, and plain http ones in production', () => {
    expect(() => loadConfig({ GITHUB_TOKEN_URL: 'not a url' })).toThrow(/GITHUB_TOKEN_URL/);
    expect(() => loadConfig({ GOOGLE_ISSUER_URL: 'ftp://issuer.test' })).toThrow(/GOOGLE_ISSUER_URL/);
    expect(loadConfig({ GITHUB_API_BASE_URL: 'http://127.0.0.1:8080/' }).oauth).toBeDefined();
    const production = {
      NODE_ENV: 'production',
      JWT_SECRET: 'x'.repeat(40),
      ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
      API_KEY_PEPPER: 'p'.repeat(40),
    };
    expect(() => loadConfig({ ...production, GOOGLE_ISSUER_URL: 'http://issuer.test' })).toThrow(/GOOGLE_ISSUER_URL/);
    expect(loadConfig(production).oauth.stateTtlSeconds).toBe(600);
  });

  it('bounds the state TTL', () => {
    expect(() => loadConfig({ OAUTH_STATE_TTL_SECONDS: '5' })).toThrow(/OAUTH_STATE_TTL_SECONDS/);
    expect(loadConfig({ OAUTH_STATE_TTL_SECONDS: '300' }).oauth.stateTtlSeconds).toBe(300);
  });
});

describe('unknown and unconfigured providers', () => {
  let h: Harness;
  beforeAll(async () => {
    // GitHub on (its endpoints are never contacted here), Google off.
    h = await createHarness({ GITHUB_CLIENT_ID: 'gh-id', GITHUB_CLIENT_SECRET: 'gh-secret', GOOGLE_CLIENT_ID: '' });
  });
  afterAll(() => h.close());

  it.each(['start', 'callback'])('answers 404 at %s for a provider that does not exist', async (step) => {
    const res = await request(h.app).get(`/api/v1/auth/oauth/facebook/${step}`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ detail: expect.stringMatching(/Unknown sign-in provider/) });
  });

  it.each(['start', 'callback'])('answers 404 at %s for a provider that is not configured', async (step) => {
    const res = await request(h.app).get(`/api/v1/auth/oauth/google/${step}`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ detail: 'Sign-in with Google is not configured on this server.' });
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('starts with a configured provider without any credential', async () => {
    const res = await request(h.app).get('/api/v1/auth/oauth/github/start');
    expect(res.status).toBe(302);
    expect(res.headers.location).toMatch(/^https:\/\/github\.com\/login\/oauth\/authorize\?client_id=gh-id&/);
    expect(new URL(res.headers.location).searchParams.get('redirect_uri')).toBe(
      `${h.config.publicBaseUrl}/api/v1/auth/oauth/github/callback`,
    );
  });
});
