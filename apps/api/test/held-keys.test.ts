// The renewal of the Idempotency-Keys a process holds (modules/idempotency/held-keys.ts), against a stand-in for its
// connection: one statement for all keys, never two at once, one warning per failing streak. The database side is
// in idempotency.test.ts.
import { HeldIdempotencyKeys } from '../src/modules/idempotency/held-keys';

const clock = { now: () => new Date('2026-11-27T10:00:00Z') };
const scope = (key: string) => ({ organizationId: 'org_1', credential: 'key:k1', key });

function logger() {
  const lines: Array<[string, string]> = [];
  return { lines, warn: (m: string) => lines.push(['warn', m]), info: (m: string) => lines.push(['info', m]) };
}

describe('HeldIdempotencyKeys', () => {
  it('keeps a key the renewal skipped (its row locked right now) as long as it is still ours', async () => {
    const pool = { query: async () => ({ rows: [{ lock_token: 't1', ours: true }] }) };
    const keys = new HeldIdempotencyKeys(pool as never, clock, logger() as never, 60_000);
    keys.hold(scope('a'), 't1');
    await keys.renew();
    expect(keys.size).toBe(1);
  });

  it('does not store an answer again while the last attempt is still running', async () => {
    const pool = { query: async () => ({ rows: [{ lock_token: 't1', ours: true }] }) };
    const keys = new HeldIdempotencyKeys(pool as never, clock, logger() as never, 60_000);
    let stores = 0;
    void keys.hold(scope('a'), 't1').settle(() => (stores++, new Promise(() => undefined)));
    void keys.renew();
    await new Promise((r) => setImmediate(r));
    void keys.renew();
    await new Promise((r) => setImmediate(r));
    expect(stores).toBe(1);
  });

  it('renews every held key in one statement, each by its own scope and lock token, and drops the ones it lost', async () => {
    const calls: unknown[][] = [];
    const pool = {
      query: async (_sql: string, params: unknown[]) => (calls.push(params), { rows: [{ lock_token: 't1', ours: true }, { lock_token: 't2', ours: false }] }),
    };
    const keys = new HeldIdempotencyKeys(pool as never, clock, logger() as never, 60_000);
    keys.hold(scope('a'), 't1');
    keys.hold(scope('b'), 't2');
    await keys.renew();
    expect(calls).toEqual([['2026-11-27T10:00:00.000Z', ['org_1', 'org_1'], ['key:k1', 'key:k1'], ['a', 'b'], ['t1', 't2']]]);
    expect(keys.size).toBe(1); // t2 is not ours any more
  });

  it('does not start a renewal while one is still running', async () => {
    let calls = 0;
    const pool = { query: () => (calls++, new Promise(() => undefined)) };
    const keys = new HeldIdempotencyKeys(pool as never, clock, logger() as never, 60_000);
    keys.hold(scope('a'), 't1');
    void keys.renew();
    void keys.renew();
    await new Promise((r) => setImmediate(r));
    expect(calls).toBe(1);
  });

  it('warns once while renewals fail, says when they go through again, and stores an answer later', async () => {
    let failing = true;
    const pool = {
      query: async () => {
        if (failing) throw new Error('connection refused');
        return { rows: [{ lock_token: 't1', ours: true }] };
      },
    };
    const log = logger();
    const keys = new HeldIdempotencyKeys(pool as never, clock, log as never, 60_000);
    let stores = 0;
    const first = await keys.hold(scope('a'), 't1').settle(async () => {
      stores += 1;
      if (failing) throw new Error('still down');
    });
    expect(first?.message).toBe('still down');
    await keys.renew();
    await keys.renew();
    expect(log.lines.filter(([level]) => level === 'warn')).toHaveLength(1);
    expect(keys.size).toBe(1); // the answer is not stored yet: still held
    failing = false;
    await keys.renew();
    expect(log.lines.slice(-2).map(([level]) => level)).toEqual(['info', 'info']);
    expect(stores).toBe(4);
    expect(keys.size).toBe(0); // stored at last: not held any more
  });

  it('logs that an answer it was still to store was not stored when a retry took its key meanwhile', async () => {
    // The first store failed (a database outage), the renewals failed too for over a minute, and a retry took the
    // key: the next renewal finds it not ours, and the answer is never stored.
    const pool = { query: async () => ({ rows: [{ lock_token: 't1', ours: false }] }) };
    const log = logger();
    const keys = new HeldIdempotencyKeys(pool as never, clock, log as never, 60_000);
    let stores = 0;
    await keys.hold(scope('a'), 't1').settle(async () => {
      stores += 1;
      throw new Error('down');
    });
    await keys.renew();
    expect(keys.size).toBe(0);
    expect(stores).toBe(1);
    expect(log.lines).toEqual([['warn', expect.stringContaining('The answer of an idempotent request was not stored')]]);
  });

  it('stops renewing a key once its request is done', async () => {
    let calls = 0;
    const pool = { query: async () => (calls++, { rows: [] }) };
    const keys = new HeldIdempotencyKeys(pool as never, clock, logger() as never, 60_000);
    expect(await keys.hold(scope('a'), 't1').settle(async () => undefined)).toBeNull();
    await keys.renew();
    expect(calls).toBe(0);
    expect(keys.size).toBe(0);
  });

  it('at shutdown, waits for an answer being stored and counts only those it could not store', async () => {
    const pool = { query: async () => ({ rows: [] }) };
    const keys = new HeldIdempotencyKeys(pool as never, clock, logger() as never, 60_000);
    void keys.hold(scope('a'), 't1').settle(() => new Promise((r) => setTimeout(r, 50)));
    void keys.hold(scope('b'), 't2').settle(async () => {
      throw new Error('down');
    });
    expect(await keys.storePendingAnswers()).toBe(1);
  });
});
