// Keep-alive delivery connections and the URL-safety guarantee: consecutive deliveries to one receiver share one
// TLS connection, and a pooled connection is never reused once the receiver's name resolves to an address that
// no longer passes the check (DNS rebinding after a successful attempt).
import { execFileSync } from 'node:child_process';
import type { Lookup } from '@svc/net';
import { classifyIpAddress } from '@svc/webhooks';
import { startReceiver, type Receiver } from './support/receiver';
import { RECEIVER_HOSTNAME } from './support/tls';
import { createWorld, type World } from './support/world';

// A public address put on the loopback interface for this test (CI runs as root), so that a name can resolve
// to a public address that really reaches a receiver on this machine.
const PUBLIC_ADDRESS = '203.0.114.7';

let answers: string[] = [];
const scriptedLookup: Lookup = async (hostname) => {
  if (hostname !== RECEIVER_HOSTNAME) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  const address = answers.length > 1 ? answers.shift()! : answers[0];
  return [{ address, family: 4 }];
};

let w: World;
let publicReceiver: Receiver;
beforeAll(async () => {
  execFileSync('ip', ['addr', 'replace', `${PUBLIC_ADDRESS}/32`, 'dev', 'lo']);
  w = await createWorld({ lookup: scriptedLookup });
  publicReceiver = await startReceiver(w.tls, PUBLIC_ADDRESS);
});
afterAll(async () => {
  await publicReceiver?.close();
  await w?.close();
  execFileSync('ip', ['addr', 'del', `${PUBLIC_ADDRESS}/32`, 'dev', 'lo']);
});

it('sends consecutive deliveries to one receiver over one reused connection', async () => {
  const sub = await w.subscribe({ name: 'reuse', url: w.receiver.url('/reuse'), events: ['report.ready'] });
  const before = w.receiver.connectionCount();
  for (let i = 0; i < 5; i += 1) {
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: `rep_${i}` } });
    expect(delivery.status).toBe('succeeded');
  }
  expect(w.receiver.requests('/reuse')).toHaveLength(5);
  expect(w.receiver.connectionCount() - before).toBe(1);
});

it('never reuses a pooled connection once the name resolves to a private address, and disables the subscription', async () => {
  expect(classifyIpAddress(PUBLIC_ADDRESS).public).toBe(true);
  // An event type the first test's subscription does not take: its keep-alive connection to w.receiver may have
  // closed by now (a loaded machine), and a fresh one for it would read as a connection made after the rebinding.
  const sub = await w.subscribe({ name: 'rebind', url: w.receiver.url('/placeholder'), events: ['pr_review.completed'] });
  await w.h.deps.prisma.webhookSubscription.update({
    where: { id: sub.id },
    data: { url: `https://${RECEIVER_HOSTNAME}:${publicReceiver.port}/rebind` },
  });

  answers = [PUBLIC_ADDRESS];
  const first = await w.publishTo(sub.id, { type: 'pr_review.completed', data: { pr_number: 1 } });
  expect(first.status).toBe('succeeded');
  expect(publicReceiver.requests('/rebind')).toHaveLength(1);
  expect(publicReceiver.requests('/rebind')[0].servername).toBe(RECEIVER_HOSTNAME);
  const connectionsAfterFirst = publicReceiver.connectionCount() + w.receiver.connectionCount();

  answers = ['127.0.0.1'];
  const second = await w.publishTo(sub.id, { type: 'pr_review.completed', data: { pr_number: 2 } });
  expect(second).toMatchObject({ status: 'failed', attemptCount: 1 });
  expect(second.attempts).toEqual([expect.objectContaining({ outcome: 'unsafe_url', responseStatus: null })]);
  expect(second.attempts[0].error).toMatch(/not a public address \(loopback\)/);
  expect(publicReceiver.requests('/rebind')).toHaveLength(1);
  expect(w.receiver.requests('/rebind')).toHaveLength(0);
  expect(publicReceiver.connectionCount() + w.receiver.connectionCount()).toBe(connectionsAfterFirst);
  expect(await w.subscription(sub.id)).toMatchObject({ status: 'disabled' });
});
