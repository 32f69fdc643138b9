// AckPolls (hec-ack.ts) on its own, against a stubbed transport: which snapshot, logger and answer each batched
// poll of one channel gets. No database, no network: ctx.post is a function the test controls.
import { AckPolls } from '../src/hec-ack';
import type { DeliveryContext, LoadedDelivery } from '../src/deliver';
import type { HttpResult, OutboundRequest } from '../src/http/post';

const URL_ = 'https://splunk.example/services/collector/event';
const CHANNEL = '11111111-2222-3333-4444-555555555555';

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
function delivery(id: string, ackId: number, bound: string | null = 'https://splunk.example:443'): LoadedDelivery {
  return {
    id,
    subscriptionId: 'whsub_1',
    hecAckId: BigInt(ackId),
    subscription: {
      id: 'whsub_1',
      url: URL_,
      splunkChannel: CHANNEL,
      authorizationEnc: 'v1.sealed-token',
      azureCredentialsEnc: null,
      credentialDestination: bound,
    },
  } as unknown as LoadedDelivery;
}

/** A transport whose every request takes `delayMs` and answers `answer(ackIds)` (null: no response, a timeout). */
function transport(delayMs: number, answer: (ackIds: number[]) => Record<string, boolean> | null) {
  const sent: number[][] = [];
  const post = async (request: OutboundRequest): Promise<HttpResult> => {
    const { acks } = JSON.parse(request.body.toString('utf8')) as { acks: number[] };
    sent.push(acks);
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    const body = answer(acks);
    if (body === null) return { response: null, body: Buffer.alloc(0), error: new Error('Timeout awaiting request'), durationMs: delayMs };
    return { response: { status: 200, headers: {} }, body: Buffer.from(JSON.stringify({ acks: body })), error: null, durationMs: delayMs };
  };
  return { post, sent };
}

/** The context one job's processor sees (its own logger, as withJobLogger gives it), sharing `ackPolls`. */
function jobContext(job: string, lines: LogLine[], post: unknown, ackPolls: AckPolls): DeliveryContext {
  return {
    logger: logger(job, lines),
    config: { webhooks: { allowedHosts: [] } },
    lookup: async () => [{ address: '93.184.216.34', family: 4 }],
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
    const polls = new AckPolls();
    // Job 1 polls with the subscription as it was; while its request is in flight, the credentials are bound to
    // another destination (same URL, channel and sealed token: the AckPolls key is unchanged) and job 2 loads that.
    const first = polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1);
    await sleep(20);
    const second = polls.ask(jobContext('job-2', lines, post, polls), delivery('whdel_2', 2, 'https://elsewhere.example:443'), 2);
    expect(await first).toBe('pending');
    expect(await second).toBe('unknown');
    // Before the batching, job 2's poll checked its own snapshot and sent nothing; its ackId must not go out now.
    expect(sent).toEqual([[1]]);
    expect(lines.filter((l) => l.message === 'HEC ack poll not sent')).toHaveLength(1);
    expect(polls.size).toBe(0);
  });

  it("logs under its own job (and names its delivery), not under the job that opened the channel's entry", async () => {
    const lines: LogLine[] = [];
    const { post } = transport(100, () => ({}) /* 2xx without the ids: unknown */);
    const failing = transport(100, () => null);
    const polls = new AckPolls();
    // Job 1 opens the entry; jobs 2 and 3 fall due while its request is in flight; the endpoint then stops answering.
    let current = post;
    const switching = (request: OutboundRequest) => current(request);
    const first = polls.ask(jobContext('job-1', lines, switching, polls), delivery('whdel_1', 1), 1);
    await sleep(20);
    current = failing.post;
    const rest = [
      polls.ask(jobContext('job-2', lines, switching, polls), delivery('whdel_2', 2), 2),
      polls.ask(jobContext('job-3', lines, switching, polls), delivery('whdel_3', 3), 3),
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
    const { post, sent } = transport(timeoutMs, () => null);
    const polls = new AckPolls();
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
    let fail = true;
    const { post, sent } = transport(50, (acks) => (fail ? null : Object.fromEntries(acks.map((id) => [String(id), true]))));
    const polls = new AckPolls();
    expect(await polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1)).toBe('unknown');
    fail = false;
    expect(await polls.ask(jobContext('job-2', lines, post, polls), delivery('whdel_2', 2), 2)).toBe('indexed');
    expect(sent).toEqual([[1], [2]]);
  });

  it('answers each delivery its own ackId, duplicates and extra ids in the answer notwithstanding', async () => {
    const lines: LogLine[] = [];
    const { post, sent } = transport(50, () => ({ 1: false, 2: true, 3: false, 99: true }));
    const polls = new AckPolls();
    const first = polls.ask(jobContext('job-1', lines, post, polls), delivery('whdel_1', 1), 1);
    await sleep(10);
    const rest = [2, 3, 2].map((id, i) => polls.ask(jobContext(`job-${i + 2}`, lines, post, polls), delivery(`whdel_${i + 2}`, id), id));
    expect(await first).toBe('pending');
    expect(await Promise.all(rest)).toEqual(['indexed', 'pending', 'indexed']);
    expect(sent[0]).toEqual([1]);
    expect(polls.size).toBe(0);
  });
});
