// The outbox relay is never held up by a long maintenance job: it runs on a queue and a worker of its own, so a
// delivery whose enqueue was lost is enqueued while a retention purge of a large table is in progress on the
// maintenance worker (issue 21: the purge used to run on the one-job-at-a-time maintenance queue, the relay behind it).
import { Client } from 'pg';
import { publishEvent } from '@svc/outbox';
import { createWorld, type World } from './support/world';

const EXPIRED = 30_000;

let w: World;
beforeAll(async () => {
  w = await createWorld({
    env: { OUTBOX_RELAY_INTERVAL_MS: '200', OUTBOX_RELAY_AGE_MS: '0', RETENTION_DAYS: '30' },
    workerOptions: { schedule: true },
  });
});
afterAll(() => w?.close());

/** EXPIRED old events, each with one delivery completed 40 days ago and one attempt, written by generate_series. */
async function seedExpired(db: Client, subscriptionId: string): Promise<void> {
  await db.query(
    `INSERT INTO events (id, organization_id, type, data, created_at)
     SELECT 'evt_old_' || g, $1, 'report.ready', '{}', now() - interval '41 days'
     FROM generate_series(1, $2) g`,
    [w.org.id, EXPIRED],
  );
  await db.query(
    `INSERT INTO webhook_deliveries (id, organization_id, subscription_id, event_id, event_type, payload, payload_format,
                                     status, attempt_count, completed_at, created_at, updated_at)
     SELECT 'whdel_old_' || g, $1, $2, 'evt_old_' || g, 'report.ready', '{}', 'service', 'succeeded', 1,
            now() - interval '40 days', now() - interval '41 days', now() - interval '40 days'
     FROM generate_series(1, $3) g`,
    [w.org.id, subscriptionId, EXPIRED],
  );
  await db.query(
    `INSERT INTO webhook_attempts (id, delivery_id, number, started_at, duration_ms, outcome, response_status)
     SELECT 'whatt_old_' || g, 'whdel_old_' || g, 1, now() - interval '40 days', 5, 'success', 200
     FROM generate_series(1, $1) g`,
    [EXPIRED],
  );
}

it('enqueues a lost delivery while a purge of a large table holds the maintenance worker', async () => {
  const sub = await w.subscribe({ name: 'during-purge', url: w.receiver.url('/during-purge'), events: ['report.ready'] });
  const db = new Client({ connectionString: w.h.config.databaseUrl });
  await db.connect();
  try {
    await seedExpired(db, sub.id);
    // Hold the purge in the middle of its work: the old events are row-locked, so once its first batch of
    // deliveries is gone it waits on them; the maintenance worker is busy with it until they are released.
    await db.query('BEGIN');
    await db.query(`SELECT id FROM events WHERE id LIKE 'evt_old_%' FOR UPDATE`);
    const purge = await w.worker!.maintenanceQueue.add('retention-purge', {}, { removeOnComplete: true });
    await waitFor(async () => (await w.worker!.maintenanceQueue.getJobState(purge.id!)) === 'active', 'the purge to start');
    await waitFor(
      async () => (await db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE id LIKE 'whdel_old_%'`)).rows[0].n < EXPIRED,
      'the purge to delete its first batch',
    );

    // Committed without the after-commit enqueue, as if the process had died in between: only the relay can send it.
    const published = await w.h.deps.prisma.$transaction((tx) =>
      publishEvent(tx, { type: 'report.ready', organizationId: w.org.id, data: { report_id: 'during-purge' } }, new Date()),
    );
    const delivery = await w.waitForDelivery(await w.deliveryFor(published, sub.id));
    expect(delivery.status).toBe('succeeded');
    expect(w.receiver.requests('/during-purge')).toHaveLength(1);
    // The purge was still in progress all along.
    expect(await w.worker!.maintenanceQueue.getJobState(purge.id!)).toBe('active');

    await db.query('COMMIT');
    await waitFor(
      async () => (await db.query(`SELECT count(*)::int AS n FROM events WHERE id LIKE 'evt_old_%'`)).rows[0].n === 0,
      'the purge to finish',
      60_000,
    );
    const left = await db.query(
      `SELECT (SELECT count(*) FROM webhook_deliveries WHERE id LIKE 'whdel_old_%')::int AS deliveries,
              (SELECT count(*) FROM webhook_attempts WHERE id LIKE 'whatt_old_%')::int AS attempts`,
    );
    expect(left.rows[0]).toEqual({ deliveries: 0, attempts: 0 });
    // The delivery the relay sent is recent: the purge left it, its attempt and its event.
    expect(await w.h.deps.prisma.webhookDelivery.count({ where: { id: delivery.id } })).toBe(1);
    expect(await w.h.deps.prisma.event.count({ where: { id: published.eventId } })).toBe(1);
  } finally {
    await db.query('ROLLBACK').catch(() => undefined);
    await db.end();
  }
  // Seeding 90,000 rows and purging them takes seconds alone and more while the full suite loads both cores; the
  // waits above allow up to a minute for the purge, so the test gets two (jest's default 30 s cut it short in CI).
}, 120_000);

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

