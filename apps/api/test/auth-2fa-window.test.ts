// The per-user count of wrong TOTP codes lasts one window (PARTIAL_TOKEN_TTL_SECONDS, here its minimum, 30 s):
// a user locked by wrong codes (someone holding the password, or their own typos) signs in again once it has passed.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer } from './support/fixtures';
import { loginRequest, loginViaApi, oathtoolCode, signupAndVerify, wrongCode } from './support/auth-helpers';

const STEP_MS = 30_000;
let h: Harness;

beforeAll(async () => {
  h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '1000', PARTIAL_TOKEN_TTL_SECONDS: '30' });
});
afterAll(() => h.close());

it('a user locked by 5 wrong codes over several partial tokens signs in with the right code once the window has passed', async () => {
  const account = await signupAndVerify(h);
  const { token } = await loginViaApi(h, account.email, account.password);
  const setup = await request(h.app).post('/api/v1/auth/2fa/setup').set(bearer(token)).send({});
  expect(setup.status).toBe(200);
  const secret: string = setup.body.secret;
  const enable = request(h.app).post('/api/v1/auth/2fa/enable').set(bearer(token));
  expect((await enable.send({ code: oathtoolCode(secret, h.clock.now()), current_password: account.password })).status).toBe(200);
  h.clock.advance(STEP_MS);

  const partial = async () => {
    const res = await loginRequest(h, { email: account.email, password: account.password });
    expect(res.status).toBe(200);
    return res.body.partial_token as string;
  };
  const second = (partialToken: string, code: string) => request(h.app).post('/api/v1/auth/login/2fa').send({ partial_token: partialToken, code });

  for (let i = 0; i < 5; i++) expect((await second(await partial(), wrongCode(secret, h.clock.now()))).status).toBe(401);
  expect((await second(await partial(), oathtoolCode(secret, h.clock.now()))).status).toBe(429);

  await new Promise((resolve) => setTimeout(resolve, 31_000));
  const ok = await second(await partial(), oathtoolCode(secret, h.clock.now()));
  expect(ok.status).toBe(200);
  expect(ok.body.token).toEqual(expect.any(String));
  // 31 s of waiting, then a dozen sign-ins (bcrypt): alone about 32 s in all; under the full suite's load the test
  // outran a 60 s timeout (2026-11-30, fresh-clone suite of 5aa826f; not investigated further).
}, 120_000);
