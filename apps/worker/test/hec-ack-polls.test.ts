// AckPolls (hec-ack.ts) on its own: which snapshot, logger and answer each batched poll of one channel gets. The
// polls go through the worker's real transport to a real HTTPS receiver on loopback (its ack endpoint scripted per
// test: slow, hung, or answering); the deliveries are the snapshots their jobs would have loaded, and each job's
// logger records what it logs.
import { credentialDestination } from '@svc/webhooks';
import { AckPolls } from '../src/hec-ack';
import type { DeliveryContext, LoadedDelivery } from '../src/deliver';
import { createPostWebhook, type PostWebhook } from '../src/http/post';
import { trustedSecureContext } from '../src/http/trust';
import { startReceiver, type Receiver } from './support/receiver';
import { createTestTls, type TestTls } from './support/tls';

const ACK_PATH = '/services/collector/ack';
const CHANNEL = '11111111-2222-3333-4444-555555555555';

let tls: TestTls;
let receiver: Receiver;
const transports: PostWebhook[] = [];
beforeAll(async () => {
  tls = await createTestTls();
  receiver = await startReceiver(tls);
});
afterEach(() => {
  for (const t of transports.splice(0)) t.close();
});
afterAll(() => receiver?.close());

interface LogLine {
  job: string;
  message: string;
  meta: Record<string, unknown>;
}

function logger(job: string, lines: LogLine[]) {
  const log = (message: string, meta: Record<string, unknown> = {}) => lines.push({ job, message, meta });
  return { info: log, warn: log, debug: log, error: log };
}

/** A delivery awaiting `ackId`, its subscription as loaded now (`bound`: the credential destination). */
function delivery(id: string, ackId: number, bound?: string): LoadedDelivery {
  const url = receiver.url('/services/collector/event');
  return {
    id,
    subscriptionId: 'whsub_1',
    hecAckId: BigInt(ackId),
    subscription: {
      id: 'whsub_1',
      url,
      splunkChannel: CHANNEL,
      authorizationEnc: 'v1.sealed-token',
      azureCredentialsEnc: null,
      credentialDestination: bound ?? credentialDestination(url),
    },
  } as unknown as LoadedDelivery;
}

/**
 * The receiver's ack endpoint: every request takes `delayMs` (null: it never answers, the transport times out) and
 * answers `answer(ackIds)`; `sent` lists the ackIds of each request. The worker's transport, with `timeoutMs`.
 */
function transport(delayMs: number | null, answer: (ackIds: number[]) => Record<string, boolean>, timeoutMs = 2_000) {
  const sent: number[][] = [];
  receiver.script(ACK_PATH, (request) => {
    const { acks } = JSON.parse(request.body.toString('utf8')) as { acks: number[] };
    sent.push(acks);
    if (delayMs === null) return { hang: true };
    return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ acks: answer(acks) }), delayMs };
  });
  const post = createPostWebhook({ timeoutMs, connectTimeoutMs: 1_000, secureContext: trustedSecureContext(tls.caFile), maxSocketsPerAddress: 4 });
  transports.push(post);
  return { post, sent };
}

/** The context one job's processor sees (its own logger, as withJobLogger gives it), sharing `ackPolls`. */
function jobContext(job: string, lines: LogLine[], post: unknown, ackPolls: AckPolls): DeliveryContext {
  return {
    logger: logger(job, lines),
    config: { webhooks: { allowedHosts: ['127.0.0.1'] } },
    openSealed: (sealed: string) => `Splunk token-of-${sealed}`,
    post,
    ackPolls,
  } as unknown as DeliveryContext;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('AckPolls: a poll that waits behind another poll of its channel', () => {
  it("is checked against its own subscription snapshot, not the first caller's: credentials rebound elsewhere meanwhile go nowhere", async () => {
    const lines: LogLine[] = [];
    const { post, sent } = transport(100, (acks) => Object.fromEntries(acks.map((id) => [String(id), false])));
    const polls = new AckPolls(2_000);
    // Job 1 polls with the subscription as it was; while its request is in flight, the credentials are bound to
    // another destination (same URL, channel and sealed token: the AckPolls key is unchanged) and job 2 loads that.
    const first = polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1);
    await sleep(20);
    const second = polls.ask(jobContext('job-2', lines, post, polls), delivery('whdel_2', 2, 'https://elsewhere.example'), 2);
    expect(await first).toBe('pending');
    expect(await second).toBe('unknown');
    // Before the batching, job 2's poll checked its own snapshot and sent nothing; its ackId must not go out now.
    expect(sent).toEqual([[1]]);
    expect(lines.filter((l) => l.message === 'HEC ack poll not sent')).toHaveLength(1);
    expect(polls.size).toBe(0);
  });

  it("logs under its own job (and names its delivery), not under the job that opened the channel's entry", async () => {
    const lines: LogLine[] = [];
    const { post, sent } = transport(100, () => ({}) /* 2xx without the ids: unknown */, 300);
    const polls = new AckPolls(2_000);
    // Job 1 opens the entry; jobs 2 and 3 fall due while its request is in flight; the endpoint then stops answering.
    const first = polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1);
    // (Once job 1's request has reached the receiver: a fixed 20 ms was too short on a loaded machine.)
    while (sent.length === 0) await sleep(5);
    receiver.script(ACK_PATH, () => ({ hang: true }));
    const rest = [
      polls.ask(jobContext('job-2', lines, post, polls), delivery('whdel_2', 2), 2),
      polls.ask(jobContext('job-3', lines, post, polls), delivery('whdel_3', 3), 3),
    ];
    await Promise.all([first, ...rest]);
    const failed = lines.filter((l) => l.message === 'HEC ack poll failed');
    expect(failed).toHaveLength(1);
    // The failed request carried jobs 2 and 3's ackIds; job 1 had ended by then.
    expect(failed[0].job).not.toBe('job-1');
    expect(failed[0].meta.delivery_ids).toEqual(['whdel_2', 'whdel_3']);
  });

  it('that failed without an answer (a hung endpoint) is answered with it: no poll holds its job for two request timeouts', async () => {
    const lines: LogLine[] = [];
    const timeoutMs = 300;
    const { post, sent } = transport(null, () => ({}), timeoutMs);
    const polls = new AckPolls(2_000);
    const started = performance.now();
    const first = polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1);
    await sleep(20);
    const waited = performance.now();
    const second = polls.ask(jobContext('job-2', lines, post, polls), delivery('whdel_2', 2), 2);
    expect(await first).toBe('unknown');
    expect(await second).toBe('unknown');
    const secondTook = performance.now() - waited;
    // Before the batching each poll took one request's time at most; behind a hung request, a second one doubled it.
    expect(secondTook).toBeLessThan(timeoutMs * 1.5);
    expect(sent).toEqual([[1]]);
    expect(performance.now() - started).toBeLessThan(timeoutMs * 1.5);
    expect(polls.size).toBe(0);
  });

  it('after a failure, a poll that falls due later is asked again (only the waiters of the failed request share its answer)', async () => {
    const lines: LogLine[] = [];
    const { post, sent } = transport(null, () => ({}), 300);
    const polls = new AckPolls(2_000);
    expect(await polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1)).toBe('unknown');
    receiver.script(ACK_PATH, (request) => {
      const { acks } = JSON.parse(request.body.toString('utf8')) as { acks: number[] };
      sent.push(acks);
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ acks: Object.fromEntries(acks.map((id) => [String(id), true])) }) };
    });
    // The channel's last request failed: job 2's poll does not wait (docs/siem.md), but its ackId is asked again
    // at once, and the answer is kept for its next poll; that request answered in time, so the next poll waits.
    expect(await polls.ask(jobContext('job-2', lines, post, polls), delivery('whdel_2', 2), 2)).toBe('unknown');
    await sleep(100);
    expect(await polls.ask(jobContext('job-2b', lines, post, polls), delivery('whdel_2', 2), 2)).toBe('indexed');
    expect(await polls.ask(jobContext('job-3', lines, post, polls), delivery('whdel_3', 3), 3)).toBe('indexed');
    expect(sent).toEqual([[1], [2], [3]]);
  });

  it('answers each delivery its own ackId, duplicates and extra ids in the answer notwithstanding', async () => {
    const lines: LogLine[] = [];
    const { post, sent } = transport(50, () => ({ 1: false, 2: true, 3: false, 99: true }));
    const polls = new AckPolls(2_000);
    const first = polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1);
    await sleep(10);
    const rest = [2, 3, 2].map((id, i) => polls.ask(jobContext(`job-${i + 2}`, lines, post, polls), delivery(`whdel_${i + 2}`, id), id));
    expect(await first).toBe('pending');
    expect(await Promise.all(rest)).toEqual(['indexed', 'pending', 'indexed']);
    expect(sent[0]).toEqual([1]);
    expect(polls.size).toBe(0);
  });
});

describe('AckPolls: a channel slower than the wait (WEBHOOK_SLOW_ATTEMPT_MS)', () => {
  it('lets a poll go after the wait; the answer that comes later is kept for its next poll, for that ackId only', async () => {
    const lines: LogLine[] = [];
    const { post, sent } = transport(400, (acks) => Object.fromEntries(acks.map((id) => [String(id), true])));
    const polls = new AckPolls(100);
    const started = performance.now();
    expect(await polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1)).toBe('unknown');
    // Before, the poll held its job (and a worker slot) for the whole request.
    expect(performance.now() - started).toBeLessThan(300);
    await sleep(500);
    expect(await polls.ask(jobContext('job-1b', lines, post, polls), delivery('whdel_1', 1), 1)).toBe('indexed');
    expect(sent).toEqual([[1]]);
    expect(polls.size).toBe(0);

    // A delivery sent again under a new ackId is not answered with what its old ackId got.
    const again = polls.ask(jobContext('job-2', lines, post, polls), delivery('whdel_2', 7), 7);
    expect(await again).toBe('unknown');
    await sleep(500);
    // (The channel is slow now: this poll does not wait at all; its request goes out all the same.)
    expect(await polls.ask(jobContext('job-2b', lines, post, polls), delivery('whdel_2', 8), 8)).toBe('unknown');
    await sleep(500);
    expect(sent).toEqual([[1], [7], [8]]);
  });

  it('behind a hung request, holds no poll at all once the wait has passed, and sends one request at a time', async () => {
    const lines: LogLine[] = [];
    const { post, sent } = transport(null, () => ({}), 600);
    const polls = new AckPolls(100);
    expect(await polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1)).toBe('unknown');
    const started = performance.now();
    const rest = await Promise.all([2, 3, 4].map((id) => polls.ask(jobContext(`job-${id}`, lines, post, polls), delivery(`whdel_${id}`, id), id)));
    expect(rest).toEqual(['unknown', 'unknown', 'unknown']);
    expect(performance.now() - started).toBeLessThan(50);
    await sleep(700);
    // The polls that came while the request hung took its failure: the failing endpoint was not asked again at once.
    expect(sent).toEqual([[1]]);
    expect(lines.filter((l) => l.message === 'HEC ack poll failed')).toHaveLength(1);
    expect(polls.size).toBe(0);
  });
});


describe('AckPolls: a late answer at shutdown', () => {
  it("is written before settled() resolves (the worker's close awaits it before closing the database)", async () => {
    const lines: LogLine[] = [];
    const { post } = transport(200, (acks) => Object.fromEntries(acks.map((id) => [String(id), true])));
    const events: string[] = [];
    const polls = new AckPolls(50, async (poll) => {
      events.push(`recording ${poll.delivery.id}`);
      await sleep(300);
      events.push(`written ${poll.delivery.id}`);
      return true;
    });
    expect(await polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1)).toBe('unknown');
    while (events.length === 0) await sleep(5);
    await polls.settled();
    events.push('settled');
    // Splunk reports an ackId true once: a write cut off by the shutdown would lose it, and the event be sent again.
    expect(events).toEqual(['recording whdel_1', 'written whdel_1', 'settled']);
    await polls.settled();
  });

  it('is logged, not lost in silence, when handling an answer fails (a defect in the recording), and settled() still resolves', async () => {
    const lines: LogLine[] = [];
    const { post } = transport(200, (acks) => Object.fromEntries(acks.map((id) => [String(id), true])));
    const polls = new AckPolls(50, (): Promise<boolean> => {
      throw new Error('recording broke before it began');
    });
    expect(await polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1)).toBe('unknown');
    await sleep(250);
    await polls.settled();
    const failure = lines.find((l) => l.message === "HEC ack: a request's answers could not be handled");
    expect(failure).toMatchObject({ job: 'job-1', meta: { error: 'Error: recording broke before it began' } });
  });
});

describe('AckPolls: a channel whose last request failed or was slow (review)', () => {
  it('is still slow for the next poll once that request has ended: the poll does not wait again for a hung endpoint', async () => {
    const lines: LogLine[] = [];
    const { post, sent } = transport(null, () => ({}), 300);
    const polls = new AckPolls(200);
    // The first poll waits 200 ms for the request, which hangs and fails at the transport's 300 ms timeout.
    expect(await polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1)).toBe('unknown');
    await sleep(300);
    expect(lines.filter((l) => l.message === 'HEC ack poll failed')).toHaveLength(1);
    // The channel's last request failed: the next poll (a new cycle) must not hold its job (a worker slot) again.
    const started = performance.now();
    expect(await polls.ask(jobContext('job-2', lines, post, polls), delivery('whdel_2', 2), 2)).toBe('unknown');
    expect(performance.now() - started).toBeLessThan(100);
    await sleep(400);
    expect(sent).toEqual([[1], [2]]);
    expect(polls.size).toBe(0);
  });

  it('is still slow for the next poll after an answer slower than the wait', async () => {
    const lines: LogLine[] = [];
    const { post, sent } = transport(400, (acks) => Object.fromEntries(acks.map((id) => [String(id), false])));
    const polls = new AckPolls(100);
    expect(await polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1)).toBe('unknown');
    await sleep(500);
    const started = performance.now();
    expect(await polls.ask(jobContext('job-2', lines, post, polls), delivery('whdel_2', 2), 2)).toBe('unknown');
    expect(performance.now() - started).toBeLessThan(50);
    await sleep(500);
    expect(sent).toEqual([[1], [2]]);
  });
});
