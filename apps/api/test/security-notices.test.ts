// Security notices (security-notices.ts): the account's own address is told, by mail, when its password is changed
// or reset, its 2FA turned on or off, or an API key made for it from a session, with when, from which address and
// what to do if it was not them. Never a password or a key's value; nobody else is told; a mail server that fails
// changes nothing of the answer.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { mailsTo as mailsToIn, noticeTo as waitForNotice, type Mail } from './support/reauthentication';
import { bearer, createOrg, createUserInOrg, TEST_PASSWORD, type TestOrg } from './support/fixtures';
import { loginViaApi, oathtoolCode, resetLinkFor, signupAndVerify } from './support/auth-helpers';
import { enableTotp } from './support/oauth-flow';
import { createKey } from './support/domain';
import { createMailer } from '@svc/mail';
import { renderSecurityNotice } from '@svc/domain';

const NEW_PASSWORD = 'another long enough passphrase';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

const mailsTo = (email: string, subject: string): Mail[] => mailsToIn(h, email, subject);
const noticeTo = (email: string, subject: string, timeoutMs?: number): Promise<Mail> => waitForNotice(h, email, subject, timeoutMs);
const settle = () => new Promise((r) => setTimeout(r, 300));

function expectWhatToDo(mail: Mail) {
  expect(mail.text).toMatch(/When: \d{4}-\d\d-\d\dT[\d:.]+Z from the address /);
  expect(mail.text).toContain('If this was you, there is nothing to do. If it was not,');
  expect(mail.text).toContain(`${h.config.publicBaseUrl}/forgot-password`);
}

describe('a change of password', () => {
  it('tells the account: when, from where, what to do; never the password; nobody else is told', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    const before = h.mail().length;
    const res = await request(h.app)
      .post('/api/v1/auth/password')
      .set(bearer(token))
      .send({ current_password: account.password, new_password: NEW_PASSWORD });
    expect(res.status).toBe(200);
    const mail = await noticeTo(account.email, 'Your password was changed');
    expectWhatToDo(mail);
    expect(mail.text).toContain('Your other sessions were signed out.');
    expect(mail.text).not.toContain(NEW_PASSWORD);
    expect(mail.text).not.toContain(account.password);
    await settle();
    expect(h.mail().slice(before).map((m: Mail) => [m.to, m.subject])).toEqual([[account.email, 'Your password was changed']]);
  });

  it('a refused change (wrong current password) sends nothing', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    const res = await request(h.app).post('/api/v1/auth/password').set(bearer(token)).send({ current_password: 'wrong one here', new_password: NEW_PASSWORD });
    expect(res.status).toBe(400);
    await settle();
    expect(mailsTo(account.email, 'Your password was changed')).toHaveLength(0);
  });
});

describe('a password reset', () => {
  it('tells the account it was reset through the mailed link', async () => {
    const account = await signupAndVerify(h);
    expect((await request(h.app).post('/api/v1/auth/password-reset').send({ email: account.email })).status).toBe(202);
    const { token } = await resetLinkFor(h, account.email);
    const res = await request(h.app).post('/api/v1/auth/password-reset/confirm').send({ token, new_password: NEW_PASSWORD });
    expect(res.status).toBe(200);
    const mail = await noticeTo(account.email, 'Your password was reset');
    expectWhatToDo(mail);
    expect(mail.text).toContain('someone can read this mailbox');
    expect(mail.text).not.toContain(token);
    expect(mail.text).not.toContain(NEW_PASSWORD);
  });
});

describe('two-factor authentication', () => {
  it('turned on, then off: one notice each', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    const secret = await enableTotp(h, token, account.password);
    const on = await noticeTo(account.email, 'Two-factor authentication was turned on');
    expect(on.text).toMatch(/When: \S+ from the address /);
    expect(on.text).toContain("contact your organization's owner and the service's support");

    h.clock.advance(30_000); // the next step: the enabling code's is spent
    try {
      const off = await request(h.app)
        .post('/api/v1/auth/2fa/disable')
        .set(bearer(token))
        .send({ code: oathtoolCode(secret, h.clock.now()), current_password: account.password });
      expect(off.status).toBe(200);
    } finally {
      h.clock.reset();
    }
    const mail = await noticeTo(account.email, 'Two-factor authentication was turned off');
    expectWhatToDo(mail);
    expect(mail.text).toContain(`${h.config.publicBaseUrl}/profile`);
    expect(mail.text).not.toContain(secret);
  });
});

describe('a new API key', () => {
  it('made from a session: its owner is told its name, prefix, scopes and expiry and the organization, never its value', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'key-notice');
    const expires = new Date(h.clock.now().getTime() + 7 * 24 * 3600_000);
    const res = await request(h.app)
      .post('/api/v1/api-keys')
      .set(bearer(user.token))
      .send({ name: 'deploy pipeline', scopes: ['projects:read', 'findings:read'], expires_at: expires.toISOString() });
    expect(res.status).toBe(201);
    const mail = await noticeTo(user.email, 'A new API key was created');
    expectWhatToDo(mail);
    expect(mail.text).toContain(`in the organization ${org.name}: "deploy pipeline" (${res.body.prefix}…, 2 scopes, expires ${expires.toISOString()})`);
    expect(mail.text).toContain(`revoke it now (${h.config.publicBaseUrl}/settings/api-keys)`);
    expect(mail.text).not.toContain(res.body.key);
    // The organization's other members are not told of someone else's key.
    await settle();
    for (const other of [org.owner, org.admin, org.member]) expect(mailsTo(other.email, 'A new API key was created')).toHaveLength(0);
  });

  it('minted by an API key: no mail (a pipeline minting short-lived keys would flood its owner)', async () => {
    const user = await createUserInOrg(h, org.id, 'admin', 'key-minter');
    const minter = await createKey(h, user.token, ['api_keys:create', 'projects:read']);
    await noticeTo(user.email, 'A new API key was created');
    const res = await request(h.app).post('/api/v1/api-keys').set(bearer(minter)).send({ name: 'short-lived', scopes: ['projects:read'] });
    expect(res.status).toBe(201);
    await settle();
    expect(mailsTo(user.email, 'A new API key was created')).toHaveLength(1);
  });

  it('a mail server that fails changes nothing: the key is made and its value answered; the failure is logged without the address', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'mail-down');
    const mailer = h.deps.mailer;
    const logged: Array<[string, Record<string, unknown>]> = [];
    const error = h.deps.logger.error.bind(h.deps.logger);
    // Not a directory; named after the recipient, as a mail server's refusal may quote it: the log must not.
    h.deps.mailer = createMailer({ from: 'x@example.test', outboxDir: `/dev/null/${user.email}` });
    (h.deps.logger as { error: unknown }).error = (message: string, meta: Record<string, unknown>) => {
      logged.push([message, meta]);
      return h.deps.logger;
    };
    try {
      const res = await request(h.app).post('/api/v1/api-keys').set(bearer(user.token)).send({ name: 'anyway', scopes: ['projects:read'] });
      expect(res.status).toBe(201);
      expect(res.body.key).toMatch(/^sk-svc-/);
      const deadline = Date.now() + 5_000;
      while (logged.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      expect(logged).toEqual([['Could not send a security notice', expect.objectContaining({ notice: 'api_key_created', user_id: user.id })]]);
      expect(JSON.stringify(logged)).not.toContain(user.email);
      expect(String(logged[0]![1].error)).toContain('/dev/null/<recipient>');
    } finally {
      h.deps.mailer = mailer;
      (h.deps.logger as { error: unknown }).error = error;
    }
    expect(await h.deps.prisma.apiKey.count({ where: { userId: user.id } })).toBe(1);
  });
});

describe('the wording (pure)', () => {
  it('names no address when the request had none, and each kind its own subject', () => {
    const context = { name: 'Ada', at: new Date('2026-11-28T08:00:00.000Z'), ip: null, publicBaseUrl: 'https://svc.example' };
    const kinds = ['password_changed', 'password_reset', '2fa_enabled', '2fa_disabled'] as const;
    const subjects = kinds.map((kind) => renderSecurityNotice({ kind }, context).subject);
    expect(new Set(subjects).size).toBe(kinds.length);
    const { text } = renderSecurityNotice({ kind: 'password_changed' }, context);
    expect(text).toContain('When: 2026-11-28T08:00:00.000Z.\n');
    expect(text.startsWith('Hello Ada,\n\n')).toBe(true);
    const key = renderSecurityNotice(
      { kind: 'api_key_created', key: { name: 'ci', prefix: 'sk-svc-AbCd', expiresAt: null, scopeCount: 1 }, organizationName: 'Acme' },
      context,
    );
    expect(key.text).toContain('"ci" (sk-svc-AbCd…, 1 scope, never expires)');
  });
});

// Keeps TEST_PASSWORD referenced for readers: fixture users share it, so no notice may carry it.
it('no notice carries the fixtures\' shared password', () => {
  for (const mail of h.mail() as Mail[]) expect(mail.text).not.toContain(TEST_PASSWORD);
});
