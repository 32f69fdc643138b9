// The API as a process, stopped with SIGTERM while work it does after an answer (the audit entry of a failed sign-in,
// written after the 401; a password-reset request's mail and entry, after the 202) is still under way: the process
// waits for that work, up to SHUTDOWN_DRAIN_TIMEOUT_MS, before it closes its connections; what still runs then is cut
// off with a warning, and the process exits all the same.
import pg from 'pg';
import { pgFields } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { resetMailsTo, signupAndVerify, type SignedUp } from './support/auth-helpers';
import { buildApi, killIfRunning, spawnApi, type ChildApi } from './support/child-api';
import { untilBlockedBy } from './support/row-locks';

let h: Harness;
let api: ChildApi | undefined;

beforeAll(async () => {
  buildApi();
  h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '1000' });
}, 120_000);
afterEach(async () => {
  await killIfRunning(api);
  api = undefined;
});
afterAll(() => h?.close());

/** A second connection holding the organization's row: an audit insert of the organization (its foreign key) waits for it. */
async function holdOrganization(organizationId: string): Promise<{ pid: number; release(): Promise<void> }> {
  const holder = new pg.Client(pgFields(h.config.databaseUrl));
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [organizationId]);
  const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
  let released = false;
  return {
    pid,
    async release() {
      if (released) return;
      released = true;
      await holder.query('COMMIT').catch(() => undefined);
      await holder.end();
    },
  };
}

async function failSignIn(account: SignedUp): Promise<number> {
  const res = await fetch(`${api!.url}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', connection: 'close' },
    body: JSON.stringify({ email: account.email, password: 'not the password at all' }),
  });
  await res.arrayBuffer();
  return res.status;
}

const failedLogins = (account: SignedUp) =>
  h.deps.prisma.auditEvent.findMany({ where: { organizationId: account.organizationId, action: 'auth.login_failed', actorId: account.userId } });

it('SIGTERM while the audit entry of a failed sign-in is held up: the entry is written before the process exits', async () => {
  const account = await signupAndVerify(h);
  api = await spawnApi(h, { SHUTDOWN_DRAIN_TIMEOUT_MS: '30000' });
  const held = await holdOrganization(account.organizationId);
  try {
    expect(await failSignIn(account)).toBe(401);
    await untilBlockedBy(h, held.pid, 1);
    api.process.kill('SIGTERM');
    await api.waitForLog('Shutting down');
    // Past the server's close: the process is still there, waiting for the entry.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(api.process.exitCode).toBeNull();
    expect(await failedLogins(account)).toEqual([]);
  } finally {
    await held.release();
  }
  expect(await api.exited).toEqual({ code: 0, signal: null });
  expect((await failedLogins(account)).map((e) => e.metadata)).toEqual([{ reason: 'invalid_password' }]);
  expect(api.logs().map((l) => l.message)).toContain('Stopped');
  expect(api.logs().filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
}, 90_000);

it('SIGTERM while a password-reset request\'s audit entry is held up: the mail is sent and the entry written before the process exits', async () => {
  const account = await signupAndVerify(h);
  api = await spawnApi(h, { SHUTDOWN_DRAIN_TIMEOUT_MS: '30000' });
  const held = await holdOrganization(account.organizationId);
  try {
    const res = await fetch(`${api.url}/api/v1/auth/password-reset`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ email: account.email }),
    });
    expect(res.status).toBe(202);
    await untilBlockedBy(h, held.pid, 1);
    api.process.kill('SIGTERM');
    await api.waitForLog('Shutting down');
    await new Promise((r) => setTimeout(r, 500));
  } finally {
    await held.release();
  }
  expect(await api.exited).toEqual({ code: 0, signal: null });
  expect(resetMailsTo(h, account.email)).toHaveLength(1);
  const entries = await h.deps.prisma.auditEvent.findMany({
    where: { organizationId: account.organizationId, action: 'auth.password_reset_requested', actorId: account.userId },
  });
  expect(entries.map((e) => e.metadata)).toEqual([{ mail: 'sent' }]);
}, 90_000);

it('work that does not end by SHUTDOWN_DRAIN_TIMEOUT_MS is cut off with a warning, and the process exits', async () => {
  const account = await signupAndVerify(h);
  api = await spawnApi(h, { SHUTDOWN_DRAIN_TIMEOUT_MS: '500' });
  const held = await holdOrganization(account.organizationId);
  try {
    expect(await failSignIn(account)).toBe(401);
    await untilBlockedBy(h, held.pid, 1);
    const signalledAt = Date.now();
    api.process.kill('SIGTERM');
    // The row stays held until the process has gone: the entry's write never ends while it runs.
    expect(await api.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - signalledAt).toBeGreaterThanOrEqual(500);
    expect(api.logs().find((l) => l.level === 'warn' && l.cut_off !== undefined)).toMatchObject({
      message: 'Stopping before the work left after answers has ended: what still runs is cut off',
      cut_off: 1,
      work: { 'record a failed login': 1 },
    });
    // Closing the pool waits for the cut-off write's connection: bounded too (main.ts CLOSE_TIMEOUT_MS).
    expect(api.logs().map((l) => l.message)).toEqual(expect.arrayContaining(['Connections not closed in time: stopping anyway', 'Stopped']));
  } finally {
    await held.release();
  }
  // Cut off means lost: the process's transaction ended with its connection.
  expect(await failedLogins(account)).toEqual([]);
}, 90_000);
