// How the API serves the dashboard's build (WEB_DIST_DIR): static files by path, index.html for any other GET that
// asks for HTML, and never under /api, whose 404s stay JSON. A folder made here stands in for apps/web/dist.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';

let h: Harness;
let withoutBuild: Harness;

beforeAll(async () => {
  const dist = mkdtempSync(path.join(tmpdir(), 'web-dist-'));
  mkdirSync(path.join(dist, 'assets'));
  writeFileSync(path.join(dist, 'index.html'), '<!doctype html><title>dashboard shell</title><script type="module" src="/assets/app.js"></script>');
  writeFileSync(path.join(dist, 'assets', 'app.js'), 'console.log("app");');
  h = await createHarness({ WEB_DIST_DIR: dist });
  withoutBuild = await createHarness({ WEB_DIST_DIR: path.join(dist, 'missing'), GITHUB_CLIENT_ID: 'gh-client', GITHUB_CLIENT_SECRET: 'gh-secret' });
});
afterAll(async () => {
  await h?.close();
  await withoutBuild?.close();
});

describe('dashboard serving', () => {
  it('serves index.html to a browser opening a client-side route, under the strict CSP', async () => {
    const res = await request(h.app).get('/verify-email?token=abc').set('Accept', 'text/html,application/xhtml+xml,*/*;q=0.8');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.text).toContain('dashboard shell');
    const scriptSrc = String(res.headers['content-security-policy']).split(';').find((d) => d.trim().startsWith('script-src'));
    expect(scriptSrc?.trim()).toBe("script-src 'self'");
  });

  it('serves the build\'s static files by path', async () => {
    const res = await request(h.app).get('/assets/app.js');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/javascript/);
  });

  it('keeps JSON 404s for /api paths even when HTML is asked for, and for non-HTML requests elsewhere', async () => {
    const api = await request(h.app).get('/api/v1/no-such-thing').set('Accept', 'text/html');
    expect(api.status).toBe(404);
    expect(api.body).toEqual({ detail: 'No route for GET /api/v1/no-such-thing.' });
    const json = await request(h.app).get('/verify-email').set('Accept', 'application/json');
    expect(json.status).toBe(404);
    expect(json.body).toEqual({ detail: 'No route for GET /verify-email.' });
    const post = await request(h.app).post('/verify-email').set('Accept', 'text/html').send({});
    expect(post.status).toBe(404);
  });

  it('without a build, only the API answers', async () => {
    const res = await request(withoutBuild.app).get('/verify-email').set('Accept', 'text/html');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ detail: 'No route for GET /verify-email.' });
  });

  it('GET /auth/providers lists only configured OAuth providers', async () => {
    const res = await request(h.app).get('/api/v1/auth/providers');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ password: true, oauth: [] });
    const withGithub = await request(withoutBuild.app).get('/api/v1/auth/providers');
    expect(withGithub.body).toEqual({ password: true, oauth: ['github'] });
  });
});
