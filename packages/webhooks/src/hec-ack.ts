// Splunk HEC indexer acknowledgement (docs/siem.md "Splunk (HTTP Event Collector)"): with `hec_ack` on, an event POST
// that Splunk accepted answers {"text":"Success","code":0,"ackId":N}; the delivery succeeds only once
// POST /services/collector/ack (same host, channel and token) with {"acks":[N]} answers {"acks":{"N":true}}.
// Pure helpers: reading Splunk's answers, the ack endpoint's address, and what a poll's answer means.

/** The HEC path of the acknowledgement endpoint, on the subscription URL's scheme, host and port. */
export const HEC_ACK_PATH = '/services/collector/ack';

/** The ack endpoint of a HEC event URL: same origin, HEC_ACK_PATH, no query (the channel goes in a header). */
export function hecAckUrl(eventUrl: string): string {
  const url = new URL(eventUrl);
  return new URL(HEC_ACK_PATH, url.origin).toString();
}

function parseJsonObject(body: Buffer | string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The `ackId` of an accepted event POST's answer (a whole number ≥ 0), or null when there is none. */
export function hecAckIdOf(body: Buffer | string): number | null {
  const ackId = parseJsonObject(body)?.ackId;
  return typeof ackId === 'number' && Number.isSafeInteger(ackId) && ackId >= 0 ? ackId : null;
}

/** The body of the ack request. */
/** The ack endpoint's request for these ackIds of one channel (Splunk answers each of them). */
export function hecAckRequestBody(ackIds: readonly number[]): Buffer {
  return Buffer.from(JSON.stringify({ acks: ackIds }), 'utf8');
}

/**
 * What the ack endpoint says about one ackId: `indexed` (true), `pending` (false), or `unknown` (an answer that is
 * not `{"acks":{...}}` with a boolean for this id; a poll that learned nothing). `not_asked`: a worker that is
 * stopping asked nothing (no verdict; the poll is asked again after the restart).
 */
export type HecAckStatus = 'indexed' | 'pending' | 'unknown' | 'not_asked';

export function hecAckStatusOf(body: Buffer | string, ackId: number): HecAckStatus {
  const acks = parseJsonObject(body)?.acks;
  if (acks === null || typeof acks !== 'object' || Array.isArray(acks)) return 'unknown';
  const value = (acks as Record<string, unknown>)[String(ackId)];
  if (value === true) return 'indexed';
  if (value === false) return 'pending';
  return 'unknown';
}

export interface HecAckTiming {
  /** How long after the event POST Splunk has to say "indexed". */
  timeoutMs: number;
  /** The wait between two polls. */
  pollMs: number;
}

/**
 * After a poll: the delivery succeeded (indexed), waits for the next poll (never past the deadline, so the last
 * poll falls on it), or its attempt failed because the ack did not come in time (the delivery is sent again, or
 * fails, per the retry policy).
 */
export type HecAckDecision = { action: 'succeed' } | { action: 'poll'; at: Date } | { action: 'give_up' };

/**
 * `stillAsked`: the answer about this ackId is still to come from a request sent before the deadline (a slow channel's
 * poll does not wait for it): an 'unknown' at the deadline then polls again, for up to `graceMs` past it, rather
 * than give up without that answer.
 */
export function hecAckDecision(status: HecAckStatus, deadline: Date, now: Date, pollMs: number, stillAsked?: { graceMs: number }): HecAckDecision {
  if (status === 'indexed') return { action: 'succeed' };
  const t = now.getTime();
  // Splunk was not asked: even on or past the deadline this is no reason to give up (and send the event again).
  if (status === 'not_asked') return { action: 'poll', at: new Date(t + pollMs) };
  const due = deadline.getTime();
  if (t < due) return { action: 'poll', at: new Date(Math.min(t + pollMs, due)) };
  if (stillAsked && status === 'unknown' && t < due + stillAsked.graceMs) {
    return { action: 'poll', at: new Date(Math.min(t + pollMs, due + stillAsked.graceMs)) };
  }
  return { action: 'give_up' };
}

/** When an event POST answered at `sentAt` must be acknowledged by, and when to ask first. */
export function hecAckSchedule(sentAt: Date, timing: HecAckTiming): { deadline: Date; firstPollAt: Date } {
  const deadline = new Date(sentAt.getTime() + timing.timeoutMs);
  return { deadline, firstPollAt: new Date(Math.min(sentAt.getTime() + timing.pollMs, deadline.getTime())) };
}
