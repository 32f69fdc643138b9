// Rate limits (SPEC Errors rule 2, DESIGN.md numbers), with harnesses whose limits are small. Limits live in
// Redis, so they hold across API instances: two apps over one Redis prefix share the counts.
import request from 'supertest';
import { createApp } from '../src/app';
import { consumeOneOf, redisRateLimiter, reserveGuess } from '../src/http/rate-limit';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, type TestOrg } from './support/fixtures';
import bcrypt from 'bcrypt';
import { signupAndVerify, signupViaApi, verificationTokenFor, type SignedUp } from './support/auth-helpers';

function expectRateLimited(res: request.Response) {
  expect(res.status).toBe(429);
  const retryAfter = res.headers['retry-after'];
  expect(retryAfter).toMatch(/^\d+$/);
  expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
  expect(Number(retryAfter)).toBeLessThanOrEqual(60);
  expect(res.body).toEqual({ detail: `Rate limit exceeded. Retry after ${retryAfter}s.` });
}

describe('login attempts (LOGIN_RATE_LIMIT_PER_MINUTE=3), per client address and per e-mail', () => {
  let h: Harness;
  let account: SignedUp;

  beforeAll(async () => {
    // TRUST_PROXY lets the test pose as several client addresses through X-Forwarded-For.
    h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '3', TRUST_PROXY: 'true' });
    account = await signupAndVerify(h);
  });
  afterAll(() => h.close());

  const attempt = (ip: string, email: string, password = 'wrong password!') =>
    request(h.app).post('/api/v1/auth/login').set('X-Forwarded-For', ip).send({ email, password });

  it('limits one address trying many e-mails', async () => {
    for (let i = 0; i < 3; i++) expect((await attempt('203.0.113.10', `probe-${i}-${uniqueSuffix()}@example.test`)).status).toBe(401);
    expectRateLimited(await attempt('203.0.113.10', `probe-x-${uniqueSuffix()}@example.test`));
    // ... even with the right password, and without touching other addresses.
    expectRateLimited(await attempt('203.0.113.10', account.email, account.password));
    expect((await attempt('203.0.113.11', `other-${uniqueSuffix()}@example.test`)).status).toBe(401);
  });

  it("counts wrong passwords at a verification link per link, whichever address they come from, before bcrypt; a right one costs nothing", async () => {
    // The link stays usable after a wrong password: without a count, whoever holds it could guess the signup password
    // (each guess a bcrypt) without end, from as many addresses as they have.
    const pending = await signupViaApi(h);
    const token = verificationTokenFor(h, pending.email);
    const verify = (ip: string, password: string) =>
      request(h.app).post('/api/v1/auth/verify-email').set('X-Forwarded-For', ip).send({ token, password });
    const compare = jest.spyOn(bcrypt, 'compare');
    try {
      for (let i = 0; i < 3; i++) expect((await verify(`198.51.100.${20 + i}`, `guess number ${i}!`)).status).toBe(400);
      expect(compare).toHaveBeenCalledTimes(3);
      expectRateLimited(await verify('198.51.100.30', pending.password));
      expect(compare).toHaveBeenCalledTimes(3);
    } finally {
      compare.mockRestore();
    }
    expect((await h.deps.prisma.user.findUniqueOrThrow({ where: { id: pending.userId } })).status).toBe('pending');

    // The person who signed up, with the right password: one guess taken and given back, so three more sign-ins from
    // that address still pass.
    const other = await signupViaApi(h);
    const ip = '198.51.100.40';
    const ok = await request(h.app).post('/api/v1/auth/verify-email').set('X-Forwarded-For', ip).send({ token: verificationTokenFor(h, other.email), password: other.password });
    expect(ok.status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await attempt(ip, other.email, other.password)).status).toBe(200);
  });

  it('counts an IPv6 client by its /64: one host cycling through the addresses of its own subnet is still one address', async () => {
    // Any host with IPv6 holds a whole /64 (2^64 addresses): counting each address apart would let it spray passwords
    // over many e-mails without limit. Each attempt below uses a new address of the same /64 and a new e-mail.
    const sprayed = (i: number) => attempt(`2001:db8:12:34::${(i + 1).toString(16)}`, `spray-${i}-${uniqueSuffix()}@example.test`);
    for (let i = 0; i < 3; i++) expect((await sprayed(i)).status).toBe(401);
    expectRateLimited(await sprayed(3));
    expectRateLimited(await attempt('2001:0db8:0012:0034:ffff:ffff:ffff:ffff', `spray-y-${uniqueSuffix()}@example.test`));
    // Another /64 is another client.
    expect((await attempt('2001:db8:12:35::1', `other-${uniqueSuffix()}@example.test`)).status).toBe(401);
  });

  it('counts an IPv4-mapped IPv6 address as its IPv4 address', async () => {
    for (let i = 0; i < 3; i++) expect((await attempt('192.0.2.77', `mapped-${i}-${uniqueSuffix()}@example.test`)).status).toBe(401);
    expectRateLimited(await attempt('::ffff:192.0.2.77', `mapped-x-${uniqueSuffix()}@example.test`));
  });

  it('counts an IPv4 client as its IPv4 address however its IPv6 form is spelled, and never lumps IPv4 clients together', async () => {
    // The same client 192.0.2.88 as a proxy may write it: hex-mapped and full-length mapped spellings are one address.
    for (const ip of ['192.0.2.88', '::ffff:c000:258', '0:0:0:0:0:ffff:192.0.2.88']) {
      expect((await attempt(ip, `spelled-${uniqueSuffix()}@example.test`)).status).toBe(401);
    }
    expectRateLimited(await attempt('::ffff:c000:0258', `spelled-x-${uniqueSuffix()}@example.test`));
    // Other IPv4 clients, in the same spellings or through a NAT64 / SIIT translator (64:ff9b::/96), are other clients:
    // before, all of them shared one key (0:0:0:0::/64 or 64:ff9b:0:0::/64), so one of them locked the others out.
    for (let i = 0; i < 4; i++) {
      expect((await attempt(`::ffff:c633:64${(i + 10).toString(16)}`, `other-m${i}-${uniqueSuffix()}@example.test`)).status).toBe(401);
      expect((await attempt(`64:ff9b::198.51.100.${i + 20}`, `other-n${i}-${uniqueSuffix()}@example.test`)).status).toBe(401);
    }
    // A NAT64-translated client is its IPv4 address.
    for (let i = 0; i < 3; i++) expect((await attempt('203.0.113.99', `nat-${i}-${uniqueSuffix()}@example.test`)).status).toBe(401);
    expectRateLimited(await attempt('64:ff9b::cb00:7163', `nat-x-${uniqueSuffix()}@example.test`));
  });

  it('counts a client whose proxy writes its address with a port (or in brackets) by the address alone', async () => {
    // Some proxies (Azure Application Gateway, for one) append the client's source port to X-Forwarded-For: a new
    // connection, a new port. Counting "address:port" apart gave every connection a fresh count.
    for (let i = 0; i < 3; i++) expect((await attempt(`203.0.113.31:${40000 + i}`, `port-${i}-${uniqueSuffix()}@example.test`)).status).toBe(401);
    expectRateLimited(await attempt('203.0.113.31:40999', `port-x-${uniqueSuffix()}@example.test`));
    expectRateLimited(await attempt('203.0.113.31', `port-y-${uniqueSuffix()}@example.test`));
    for (let i = 0; i < 3; i++) {
      expect((await attempt(`[2001:db8:12:36::${i + 1}]:${50000 + i}`, `port6-${i}-${uniqueSuffix()}@example.test`)).status).toBe(401);
    }
    expectRateLimited(await attempt('[2001:db8:12:36::99]', `port6-x-${uniqueSuffix()}@example.test`));
    expectRateLimited(await attempt('2001:db8:12:36::abc', `port6-y-${uniqueSuffix()}@example.test`));
    // Another client is not affected.
    expect((await attempt('203.0.113.32:40000', `port-z-${uniqueSuffix()}@example.test`)).status).toBe(401);
  });

  it('limits one e-mail tried from many addresses', async () => {
    const target = `target-${uniqueSuffix()}@example.test`;
    for (let i = 0; i < 3; i++) expect((await attempt(`198.51.100.${i + 1}`, target)).status).toBe(401);
    expectRateLimited(await attempt('198.51.100.99', target));
    expectRateLimited(await attempt('198.51.100.99', target.toUpperCase()));
  });
});

describe('requests (RATE_LIMIT_PER_MINUTE=3), per credential and per address before authentication', () => {
  let h: Harness;
  let org: TestOrg;

  beforeAll(async () => {
    h = await createHarness({ RATE_LIMIT_PER_MINUTE: '3' });
    org = await createOrg(h);
  });
  afterAll(() => h.close());

  it('limits an authenticated credential, not the others', async () => {
    const me = (token: string) => request(h.app).get('/api/v1/auth/me').set(bearer(token));
    for (let i = 0; i < 3; i++) expect((await me(org.member.token)).status).toBe(200);
    expectRateLimited(await me(org.member.token));
    expect((await me(org.manager.token)).status).toBe(200);
  });

  it('shares the count between API instances through Redis', async () => {
    const second = createApp(h.deps);
    const me = (app: typeof h.app) => request(app).get('/api/v1/auth/me').set(bearer(org.admin.token));
    expect((await me(h.app)).status).toBe(200);
    expect((await me(second)).status).toBe(200);
    expect((await me(h.app)).status).toBe(200);
    expectRateLimited(await me(second));
  });

  it('counts requests that arrive together one by one: the first ones within the limit pass, the rest get 429', async () => {
    const me = () => request(h.app).get('/api/v1/auth/me').set(bearer(org.owner.token));
    const statuses = (await Promise.all(Array.from({ length: 5 }, me))).map((res) => res.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2);
    // Started in one tick, so counted by one command: in arrival order, as one command each would.
    const key = `key:together-${uniqueSuffix()}`;
    const verdicts = await Promise.allSettled(Array.from({ length: 5 }, () => consumeOneOf(h.app.locals.limiters.request, key)));
    expect(verdicts.map((v) => (v.status === 'fulfilled' ? 200 : (v.reason as { status: number }).status))).toEqual([200, 200, 200, 429, 429]);
    await expect(consumeOneOf(h.app.locals.limiters.request, key)).rejects.toMatchObject({ status: 429 });
  });

  it("in one batch, one key's refusals are its own: another key's requests beside them pass, and neither goes past its limit", async () => {
    const spent = `key:spent-${uniqueSuffix()}`;
    const fresh = `key:fresh-${uniqueSuffix()}`;
    const limiter = h.app.locals.limiters.request;
    for (let i = 0; i < 3; i++) await consumeOneOf(limiter, spent);
    const keys = [spent, fresh, spent, fresh, fresh, fresh];
    const verdicts = await Promise.allSettled(keys.map((key) => consumeOneOf(limiter, key)));
    expect(verdicts.map((v) => (v.status === 'fulfilled' ? 200 : (v.reason as { status: number }).status))).toEqual([429, 200, 429, 200, 200, 429]);
  });

  it('limits unauthenticated routes per client address', async () => {
    const verify = () => request(h.app).post('/api/v1/auth/verify-email').send({ token: 'nope', password: 'any password' });
    for (let i = 0; i < 3; i++) expect((await verify()).status).toBe(400);
    expectRateLimited(await verify());
  });
});

describe('guesses (TOTP codes): a point taken before the check, given back when the guess was right', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(() => h.close());

  it("gives a point back only to a count still live: a refund after the window ran out buys the next window no extra guess", async () => {
    // rate-limiter-flexible's reward() recreated the expired key at -1 with a whole window: one more guess there.
    const limiter = redisRateLimiter(h.deps.redis, h.config.redisPrefix, { name: `guess-test-${uniqueSuffix()}`, points: 2, duration: 1, failOpen: false });
    const key = 'user:usr_test';
    const late = await reserveGuess(limiter, [key]);
    await new Promise((r) => setTimeout(r, 1_200));
    await late.refund();
    expect(await h.deps.redis.exists(limiter.getKey(key))).toBe(0);
    const verdicts = await Promise.allSettled(Array.from({ length: 4 }, () => reserveGuess(limiter, [key])));
    expect(verdicts.map((v) => v.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected']);
    expect(verdicts[2]).toMatchObject({ reason: { status: 429 } });
  });

  it('gives back the points of every key when one of them is used up, and a right guess its own', async () => {
    const limiter = redisRateLimiter(h.deps.redis, h.config.redisPrefix, { name: `guess-test-${uniqueSuffix()}`, points: 2, duration: 60, failOpen: false });
    const counts = async () => Promise.all(['a', 'b'].map(async (k) => (await limiter.get(k))?.consumedPoints ?? 0));
    await reserveGuess(limiter, ['b']);
    await reserveGuess(limiter, ['b']);
    await expect(reserveGuess(limiter, ['a', 'b'])).rejects.toMatchObject({ status: 429 });
    expect(await counts()).toEqual([0, 2]);
    const right = await reserveGuess(limiter, ['a']);
    await right.refund();
    expect(await counts()).toEqual([0, 2]);
  });
});
