// patches/bullmq@6.7.0.patch, against the real Redis and real BullMQ workers: a job taken to active raises the queue's
// wake-up marker only while another job is left to take. Unpatched, BullMQ raised it on every fetch, so at a quiet
// moment each job cost its worker a second blocking wait that returned at once and a fetch that found nothing.
import { randomUUID } from 'node:crypto';
import { Queue, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { loadConfig } from '@svc/config';
import { createRedis } from './index';

const config = loadConfig();
const prefix = `test_bullmq_patch_${randomUUID()}`;
const redises: Redis[] = [];
/** A connection this file closes at the end (BullMQ leaves the connections it is given open). */
const connection = () => {
  const redis = createRedis(config.redis);
  redises.push(redis);
  return redis;
};

const opened: Array<{ close(): Promise<unknown> }> = [];
afterAll(async () => {
  for (const o of opened.reverse()) await o.close();
  const redis = connection();
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await Promise.all(redises.map((r) => r.quit()));
});

function queueNamed(name: string): Queue {
  const queue = new Queue(name, { connection: connection(), prefix });
  opened.push(queue);
  return queue;
}

function workerOn(name: string, process: (job: Job) => Promise<unknown>, concurrency: number): Worker {
  const worker = new Worker(name, process, { connection: connection(), prefix, concurrency });
  opened.push(worker);
  return worker;
}

/** Every command that names this queue's keys, as Redis saw it (MONITOR), while `run` runs. */
async function commandsDuring(queueName: string, run: () => Promise<void>): Promise<string[]> {
  const monitorClient = connection();
  const monitor = await monitorClient.monitor();
  const seen: string[] = [];
  monitor.on('monitor', (_time: string, args: string[]) => {
    if (args.some((a) => typeof a === 'string' && a.startsWith(`${prefix}:${queueName}:`))) seen.push(String(args[0]).toLowerCase());
  });
  try {
    await run();
  } finally {
    monitor.disconnect();
  }
  return seen;
}

it('fetches each job of a quiet queue with one blocking wait, not two', async () => {
  const name = `quiet_${randomUUID()}`;
  const queue = queueNamed(name);
  const done = new Map<string, () => void>();
  const worker = workerOn(name, async (job) => done.get(job.id!)?.(), 8);
  await worker.waitUntilReady();
  await new Promise((resolve) => setTimeout(resolve, 200)); // the worker is in its blocking wait
  const jobs = 10;
  const seen = await commandsDuring(name, async () => {
    for (let i = 0; i < jobs; i += 1) {
      const id = `job-${i}`;
      const finished = new Promise<void>((resolve) => done.set(id, resolve));
      await queue.add('quiet', {}, { jobId: id });
      await finished;
      await new Promise((resolve) => setTimeout(resolve, 50)); // back in its blocking wait
    }
  });
  const waits = seen.filter((c) => c === 'bzpopmin').length;
  // One wait per job (the one that the job's marker ends); unpatched: two, the second ended by the marker its own
  // fetch raised.
  expect(waits).toBeGreaterThanOrEqual(jobs - 1);
  expect(waits).toBeLessThanOrEqual(jobs + 1);
});

it('still wakes a second worker when a job is left for it', async () => {
  const name = `pair_${randomUUID()}`;
  const queue = queueNamed(name);
  // Each job waits until both are running: only a second worker can run the second (each worker runs one at a time).
  let started = 0;
  let bothRunning!: () => void;
  const both = new Promise<void>((resolve) => (bothRunning = resolve));
  const process = async () => {
    started += 1;
    if (started === 2) bothRunning();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('the other job never started')), 5_000)));
    await Promise.race([both, timeout]).finally(() => clearTimeout(timer));
  };
  const first = workerOn(name, process, 1);
  const second = workerOn(name, process, 1);
  await Promise.all([first.waitUntilReady(), second.waitUntilReady()]);
  await new Promise((resolve) => setTimeout(resolve, 200)); // both in their blocking waits
  const completed = new Promise<number>((resolve) => {
    let n = 0;
    const count = () => (n += 1) === 2 && resolve(n);
    first.on('completed', count);
    second.on('completed', count);
  });
  await queue.addBulk([{ name: 'pair', data: {} }, { name: 'pair', data: {} }]);
  await expect(completed).resolves.toBe(2);
});

it('keeps the wake-up marker while a delayed job waits, so an idle worker learns when it is due', async () => {
  const name = `retry_${randomUUID()}`;
  const queue = queueNamed(name);
  await queue.add('retry', {}, { jobId: 'first', attempts: 2, backoff: { type: 'fixed', delay: 1_000 } });
  await queue.add('next', {}, { jobId: 'second' });
  const worker = new Worker(name, null, { connection: connection(), prefix });
  opened.push(worker);
  const first = await worker.getNextJob('token-1');
  expect(first?.id).toBe('first');
  const redis = connection();
  const marker = `${prefix}:${name}:marker`;
  await redis.del(marker); // an idle worker's blocking wait took it
  // The attempt fails: the job is delayed for its retry and, in the same script, the next job is fetched. The
  // script returns before BullMQ's own delay marker, so only the fetch's marker tells idle workers to look.
  await first!.moveToFailed(new Error('receiver down'), 'token-1', true);
  expect(await redis.zcard(`${prefix}:${name}:delayed`)).toBe(1);
  expect(await redis.zrange(marker, 0, -1)).not.toEqual([]);
});
