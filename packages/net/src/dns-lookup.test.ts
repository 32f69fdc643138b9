// Customer-configured names are resolved through DNS on the event loop (dnsLookup), against a real UDP name server
// this test runs on loopback: answers, NXDOMAIN, a server that never answers, and a busy libuv thread pool.
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, open, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSocket, type Socket } from 'node:dgram';
import { DEFAULT_DNS_SETTINGS, dnsLookup, resolveWebhookTarget, type DnsSettings } from './index';

const A = 1;
const AAAA = 28;
const ANSWERS: Record<string, { [A]?: string; [AAAA]?: string }> = {
  'hooks.example.test': { [A]: '93.184.216.34', [AAAA]: '2606:2800:220:1::1' },
  'v6only.example.test': { [AAAA]: '2606:2800:220:1::2' },
  'private.example.test': { [A]: '10.1.2.3' },
};
const NEVER_ANSWERED = 'blackhole.example.test';

/** The question of a DNS query: its name, type, and where the question ends. */
function questionOf(query: Buffer): { name: string; type: number; end: number } {
  const labels: string[] = [];
  let at = 12;
  while (query[at] !== 0) {
    labels.push(query.subarray(at + 1, at + 1 + query[at]).toString('ascii'));
    at += query[at] + 1;
  }
  return { name: labels.join('.').toLowerCase(), type: query.readUInt16BE(at + 1), end: at + 5 };
}

function ipBytes(address: string, type: number): Buffer {
  if (type === A) return Buffer.from(address.split('.').map(Number));
  const [head, tail = ''] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return Buffer.concat(groups.map((g) => Buffer.from([parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff])));
}

/** A DNS response: the query's id and question, NOERROR with the answer (or none: NODATA), or NXDOMAIN. */
function responseTo(query: Buffer): Buffer | null {
  const { name, type, end } = questionOf(query);
  if (name === NEVER_ANSWERED) return null;
  const known = ANSWERS[name];
  const address = known?.[type as typeof A | typeof AAAA];
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2);
  header.writeUInt16BE(0x8180 | (known ? 0 : 3), 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(address ? 1 : 0, 6);
  const question = query.subarray(12, end);
  if (!address) return Buffer.concat([header, question]);
  const rdata = ipBytes(address, type);
  const answer = Buffer.alloc(12);
  answer.writeUInt16BE(0xc00c, 0);
  answer.writeUInt16BE(type, 2);
  answer.writeUInt16BE(1, 4);
  answer.writeUInt32BE(60, 6);
  answer.writeUInt16BE(rdata.length, 10);
  return Buffer.concat([header, question, answer, rdata]);
}

/**
 * Holds every thread of libuv's pool: each opens, for reading, a FIFO no one writes to, which blocks until release()
 * opens the writing end from the event loop (non-blocking, so it never waits on a thread that has not started).
 */
function holdTheThreadPool(): { release: () => Promise<void> } {
  const folder = mkdtempSync(join(tmpdir(), 'dns-pool-'));
  const fifos = Array.from({ length: Number(process.env.UV_THREADPOOL_SIZE ?? 4) }, (_, i) => join(folder, `held-${i}`));
  const opened = fifos.map((fifo) => {
    execFileSync('mkfifo', [fifo]);
    return new Promise<number>((resolve, reject) => open(fifo, 'r', (error, fd) => (error ? reject(error) : resolve(fd))));
  });
  const writerOf = async (fifo: string): Promise<number> => {
    for (;;) {
      try {
        return openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENXIO') throw error; // no reader on a thread yet
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
  };
  return {
    release: async () => {
      const writers = await Promise.all(fifos.map(writerOf));
      for (const fd of [...(await Promise.all(opened)), ...writers]) closeSync(fd);
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

let server: Socket;
let settings: DnsSettings;
const queries: string[] = [];

beforeAll(async () => {
  server = createSocket('udp4');
  server.on('message', (query, from) => {
    queries.push(questionOf(query).name);
    const response = responseTo(query);
    if (response) server.send(response, from.port, from.address);
  });
  await new Promise<void>((resolve) => server.bind(0, '127.0.0.1', resolve));
  settings = { servers: [`127.0.0.1:${server.address().port}`], timeoutMs: 200, tries: 2 };
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('dnsLookup (customer-configured names)', () => {
  it('answers the IPv4 addresses first, then the IPv6 ones; an IPv6-only name too', async () => {
    expect(await dnsLookup(settings)('hooks.example.test')).toEqual([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::1', family: 6 },
    ]);
    expect(await dnsLookup(settings)('v6only.example.test')).toEqual([{ address: '2606:2800:220:1::2', family: 6 }]);
  });

  it('asks the configured name server, and the URL check applies the address rule to its answers', async () => {
    expect(await resolveWebhookTarget('https://hooks.example.test/x', { dns: settings })).toEqual({
      ok: true,
      target: expect.objectContaining({ address: '93.184.216.34', family: 4 }),
    });
    expect(await resolveWebhookTarget('https://private.example.test/x', { dns: settings })).toEqual({ ok: false, reason: 'private' });
    expect(queries).toContain('private.example.test');
  });

  it('refuses a name that does not exist (NXDOMAIN) as unresolvable', async () => {
    await expect(dnsLookup(settings)('nowhere.example.test')).rejects.toThrow();
    expect(await resolveWebhookTarget('https://nowhere.example.test/', { dns: settings })).toEqual({ ok: false, reason: 'unresolvable' });
  });

  it('gives up on a name server that never answers (unresolvable) instead of waiting for it', async () => {
    // 200 ms, then 400 ms on the retry: well under a second, where the system resolver waits 5 s per try.
    const started = performance.now();
    expect(await resolveWebhookTarget(`https://${NEVER_ANSWERED}/`, { dns: settings })).toEqual({ ok: false, reason: 'unresolvable' });
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(queries.filter((name) => name === NEVER_ANSWERED).length).toBeGreaterThanOrEqual(2);
  });

  it("does not wait for the thread pool: a lookup answers while every one of libuv's threads is held", async () => {
    // Through getaddrinfo the lookup would queue behind them (bcrypt in the API is such a job, and a lookup held by
    // a name server that never answers holds a thread for the system resolver's whole timeout). Each thread here
    // opens a FIFO that has no writer yet, which holds it until the test opens the other end: no race with a
    // job's length, so a busy machine cannot reorder the outcome.
    const pool = holdTheThreadPool();
    let timer: NodeJS.Timeout | undefined;
    try {
      const outcome = await Promise.race([
        dnsLookup(settings)('hooks.example.test'),
        new Promise((resolve) => (timer = setTimeout(() => resolve('still waiting'), 5_000))),
      ]);
      expect(outcome).toEqual(expect.arrayContaining([{ address: '93.184.216.34', family: 4 }]));
    } finally {
      clearTimeout(timer);
      await pool.release();
    }
  });

  it('keeps the system resolver for allow-listed hosts (localhost, /etc/hosts names): the operator chose them', async () => {
    const result = await resolveWebhookTarget('https://localhost:8443/', { allowedHosts: ['localhost:8443'], dns: settings });
    expect(result).toEqual({ ok: true, target: expect.objectContaining({ address: expect.stringMatching(/^(127\.0\.0\.1|::1)$/) }) });
    expect(queries).not.toContain('localhost');
  });

  it('defaults to the system name servers with a 2 s first timeout and two tries', () => {
    expect(DEFAULT_DNS_SETTINGS).toEqual({ servers: [], timeoutMs: 2_000, tries: 2 });
  });
});
