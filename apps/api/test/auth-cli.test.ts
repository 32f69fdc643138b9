// The operator CLI's create-owner, run in-process against the test database (the same code `node dist/cli.js`
// runs), then checked through the API.
import request from 'supertest';
import { runCli } from '../src/cli';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer } from './support/fixtures';

let h: Harness;

beforeAll(async () => {
  h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '1000' });
});
afterAll(() => h.close());

async function cli(argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    env: { ...process.env, BCRYPT_ROUNDS: '4', LOG_LEVEL: 'error' },
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
  });
  return { code, stdout, stderr };
}

describe('cli create-owner', () => {
  it('creates an active owner of a new organization who can log in at once, and prints the ids as JSON', async () => {
    const email = `Operator-${uniqueSuffix()}@example.test`;
    const run = await cli(['create-owner', '--email', email, '--password', 'operator passphrase', '--org', 'Ops Org', '--name', 'Op']);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    const printed = JSON.parse(run.stdout);
    expect(printed).toEqual({ user_id: expect.stringMatching(/^usr_/), organization_id: expect.stringMatching(/^org_/), status: 'active' });

    expect(h.mail().filter((m) => m.to === email.toLowerCase())).toHaveLength(0);
    const login = await request(h.app).post('/api/v1/auth/login').send({ email, password: 'operator passphrase' });
    expect(login.status).toBe(200);
    const me = await request(h.app).get('/api/v1/auth/me').set(bearer(login.body.token));
    expect(me.body).toMatchObject({
      user: { id: printed.user_id, email: email.toLowerCase(), name: 'Op' },
      organization: { id: printed.organization_id, name: 'Ops Org' },
      role: 'owner',
    });
  });

  it('fails clearly (exit 1, nothing created) when the e-mail is already registered', async () => {
    const email = `dup-${uniqueSuffix()}@example.test`;
    expect((await cli(['create-owner', '--email', email, '--password', 'operator passphrase', '--org', 'A'])).code).toBe(0);
    const before = await h.deps.prisma.organization.count();
    const again = await cli(['create-owner', '--email', email.toUpperCase(), '--password', 'operator passphrase', '--org', 'B']);
    expect(again.code).toBe(1);
    expect(again.stdout).toBe('');
    expect(again.stderr).toMatch(/already exists/);
    expect(await h.deps.prisma.organization.count()).toBe(before);
  });

  it('answers usage errors with exit 2 and applies the signup rules', async () => {
    expect((await cli([])).code).toBe(2);
    expect((await cli(['make-coffee'])).stderr).toContain('Unknown command');
    const missing = await cli(['create-owner', '--email', 'x@example.test']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--password');
    const long = await cli(['create-owner', '--email', `l-${uniqueSuffix()}@example.test`, '--password', 'é'.repeat(40), '--org', 'L']);
    expect(long.code).toBe(2);
    expect(long.stderr).toContain('72 bytes');
    expect((await cli(['create-owner', '--email', 'a@b.test', '--password', 'p'.repeat(12), '--org', 'O', '--bogus', '1'])).code).toBe(2);
  });
});
