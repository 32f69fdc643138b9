import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import express from 'express';
import Joi from 'joi';
import request from 'supertest';
import { errorHandler } from '../src/http/errors';
import { createRateLimiters } from '../src/http/rate-limit';
import { routerFor, type RouteSpec } from '../src/http/route';
import { openApiPath } from '../src/openapi/document';
import { createHarness, type Harness } from './support/harness';

let h: Harness;
let document: { openapi: string; paths: Record<string, Record<string, Record<string, unknown>>> };

beforeAll(async () => {
  h = await createHarness();
  const res = await request(h.app).get('/api/v1/openapi.json');
  expect(res.status).toBe(200);
  document = res.body;
});
afterAll(() => h.close());

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1 and documents every route of the API with its scope', () => {
    expect(document.openapi).toBe('3.1.0');
    const routes: RouteSpec[] = h.app.locals.routes;
    expect(routes.length).toBeGreaterThan(50);
    const missing = routes.filter((r) => !document.paths[openApiPath(r.path)]?.[r.method]);
    expect(missing.map((r) => `${r.method} ${r.path}`)).toEqual([]);
    for (const route of routes) {
      const op = document.paths[openApiPath(route.path)][route.method];
      if (route.scope === 'public') expect(op.security).toEqual([]);
      else expect(op['x-required-scope']).toBe(route.scope);
    }
    const documented = Object.values(document.paths).reduce((n, ops) => n + Object.keys(ops).length, 0);
    expect(documented).toBe(routes.length);
  });

  it('documents request bodies and success bodies from the route schemas', () => {
    const create = document.paths['/api/v1/webhooks/subscriptions'].post as {
      requestBody: { content: Record<string, { schema: { required: string[]; properties: Record<string, unknown> } }> };
      responses: Record<string, { content: Record<string, { schema: { properties: Record<string, unknown> } }> }>;
    };
    expect(create.requestBody.content['application/json'].schema.required).toEqual(expect.arrayContaining(['name', 'url', 'events']));
    const created = create.responses['201'].content['application/json'].schema as { properties: object; required: string[] };
    expect(Object.keys(created.properties)).toContain('secret');
    expect(created.required).toEqual(Object.keys(created.properties));
    const list = document.paths['/api/v1/api-keys'].get as { parameters: Array<{ name: string; in: string }> };
    expect(list.parameters.map((p) => `${p.in}:${p.name}`)).toEqual(expect.arrayContaining(['query:limit', 'query:cursor']));
  });

  it('passes @redocly/cli lint', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'openapi-'));
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(document));
    const bin = path.resolve(__dirname, '../../../node_modules/.bin/redocly');
    const lint = spawnSync(bin, ['lint', file, '--format', 'stylish'], { encoding: 'utf8', timeout: 120_000 });
    if (lint.status !== 0) throw new Error(`redocly lint failed:\n${lint.stdout}\n${lint.stderr}`);
  });
});

describe('documented response shapes are enforced', () => {
  function appWith(route: RouteSpec) {
    const limiters = createRateLimiters(h.deps.redis, h.config.redisPrefix, {
      perMinute: 1000, loginPerMinute: 10, totpMaxFailures: 5, partialTokenTtlSeconds: 300,
      passwordReset: { perEmailPerHour: 5, perIpPerHour: 30 },
    });
    const app = express();
    app.use(routerFor([route], h.deps, limiters));
    app.use(errorHandler(h.deps.logger));
    return app;
  }
  const shape = Joi.object({ id: Joi.string(), count: Joi.number() });

  it('lets a body that matches its schema through', async () => {
    const app = appWith({ method: 'get', path: '/x', scope: 'public', summary: 'x', response: shape, handler: () => ({ id: 'a', count: 1 }) });
    expect((await request(app).get('/x')).body).toEqual({ id: 'a', count: 1 });
  });

  it.each([
    ['a missing field', { id: 'a' }],
    ['an undocumented field', { id: 'a', count: 1, secret: 'x' }],
    ['a field of another type', { id: 'a', count: '1' }],
  ])('fails a response with %s (under NODE_ENV=test)', async (_label, body) => {
    const app = appWith({ method: 'get', path: '/x', scope: 'public', summary: 'x', response: shape, handler: () => body });
    const res = await request(app).get('/x');
    expect(res.status).toBe(500);
  });
});

describe('every JSON body is documented', () => {
  it('fails a route that returns a body but declares no response shape', async () => {
    const limiters = createRateLimiters(h.deps.redis, h.config.redisPrefix, {
      perMinute: 1000, loginPerMinute: 10, totpMaxFailures: 5, partialTokenTtlSeconds: 300,
      passwordReset: { perEmailPerHour: 5, perIpPerHour: 30 },
    });
    const app = express();
    app.use(routerFor([{ method: 'get', path: '/y', scope: 'public', summary: 'y', handler: () => ({ id: 'a' }) }], h.deps, limiters));
    app.use(errorHandler(h.deps.logger));
    expect((await request(app).get('/y')).status).toBe(500);
  });
});
