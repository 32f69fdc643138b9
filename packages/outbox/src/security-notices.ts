// Security notices kept until sent (docs/api.md "Security notices"), an outbox of mails: the notice is written in the
// transaction of the change it is about (recordSecurityNotice), so it commits with the change or not at all. After
// the commit the API sends it at once (sendSecurityNotice); whatever stopped that (a mail server that refused or was
// down, an API process that stopped before or during the send) the worker's sweep (sweepSecurityNotices, every
// ~15 s) sends it later, backing off, for 24 h, then gives it up.
//
// Exactly one sender holds a notice at a time: a sender first claims it (claimed_until, a conditional UPDATE; the
// sweep's batch is locked FOR UPDATE SKIP LOCKED), then sends, then marks it sent. A claim outlasts the send's
// timeout, so a live sender is never overtaken; a sender that died holding one is overtaken once it runs out. A send
// that timed out is a failed attempt but goes on: its notice stays held (SECURITY_NOTICE_LATE_SEND_CLAIM_MS, longer
// than the mail transport waits) until it ends, then is marked sent if the mail server accepted it after all, or let
// go to be tried again if it refused (a slow mail server gets each notice once, not once per attempt). Only a sender
// that dies between the mail server's acceptance and the mark sends a notice twice.
//
// The mail goes to the account's CURRENT address and name, read at the claim; an erased account (its address the
// pseudonym) gets nothing and its notice goes. Logs carry the user's id and the notice's kind, never the address
// (every address in a mail server's refusal, which may quote it, is replaced) nor the mail's text.
import type { Logger } from '@svc/config';
import { newId, Prisma, utcTimestamp, type Db, type Tx } from '@svc/db';
import {
  isErasedAddress,
  SECURITY_NOTICE_SWEEP_DELAY_MS,
  TimeoutError,
  renderSecurityNotice,
  securityNoticeDetails,
  securityNoticeFromStored,
  securityNoticeRetryAt,
  withTimeout,
  type Clock,
  type SecurityNotice,
} from '@svc/domain';
import { mailErrorForLog } from '@svc/mail';

/** How long one send may take before it counts as failed (its claim is kept: the send may still go on). */
export const SECURITY_NOTICE_SEND_TIMEOUT_MS = 30_000;
/** How long a claim holds a notice: longer than a send may take, and than a sweep's batch (sent side by side). */
export const SECURITY_NOTICE_CLAIM_MS = 2 * 60_000;
/**
 * How long a notice whose send timed out stays held, the send still under way: longer than nodemailer waits on a
 * silent mail server (its socket timeout, 10 min). The send's end lets go of it sooner (or marks it sent).
 */
export const SECURITY_NOTICE_LATE_SEND_CLAIM_MS = 15 * 60_000;
/** Notices a sweep claims and sends at once. */
export const SECURITY_NOTICE_SWEEP_BATCH = 20;
/** A sweep claims batch after batch until none is due or this long has passed. */
export const SECURITY_NOTICE_SWEEP_BUDGET_MS = 10_000;

/** The one thing the senders need of a mailer (@svc/mail's Mailer is one). */
export interface NoticeMailer {
  send(message: { to: string; subject: string; text: string }): Promise<void>;
}

export interface NoticeSenderDeps {
  prisma: Db;
  mailer: NoticeMailer;
  logger: Logger;
  clock: Clock;
  config: { publicBaseUrl: string };
  /** How long a send may take before it counts as failed; SECURITY_NOTICE_SEND_TIMEOUT_MS unless set (tests shorten it). */
  sendTimeoutMs?: number;
}

export type NoticeOutcome =
  /** Sent and marked sent. */
  | 'sent'
  /** Not sent; tried again later. */
  | 'failed'
  /** Not sent, and tried for long enough: no further attempt. */
  | 'gave_up'
  /** Held by another sender, sent already, or given up: nothing done. */
  | 'taken'
  /** The account was erased: the notice is removed unsent. */
  | 'dropped';

/**
 * Writes a notice in the caller's transaction (the change's). `at` is the time of the change, stated in the mail.
 * The sweep leaves it to the API for SECURITY_NOTICE_SWEEP_DELAY_MS.
 */
export async function recordSecurityNotice(
  tx: Pick<Tx, 'securityNotice'>,
  input: { userId: string; notice: SecurityNotice; ip: string | null | undefined; at: Date },
): Promise<string> {
  const id = newId('ntc');
  await tx.securityNotice.create({
    data: {
      id,
      userId: input.userId,
      kind: input.notice.kind,
      details: securityNoticeDetails(input.notice),
      ip: input.ip ?? null,
      createdAt: input.at,
      nextAttemptAt: new Date(input.at.getTime() + SECURITY_NOTICE_SWEEP_DELAY_MS),
    },
  });
  return id;
}

interface ClaimedNotice {
  id: string;
  user_id: string;
  kind: string;
  details: unknown;
  ip: string | null;
  created_at: Date;
  attempts: number;
  email: string;
  name: string;
}

const CLAIMED_COLUMNS = Prisma.sql`n.id, n.user_id, n.kind, n.details, n.ip, n.created_at, n.attempts, u.email, u.name`;

/** Claims the notices `which` picks (a condition on `n`, security_notices), answering them with their account's address. */
function claimWhere(db: Db, which: Prisma.Sql, until: Date): Promise<ClaimedNotice[]> {
  return db.$queryRaw<ClaimedNotice[]>`
    UPDATE security_notices n SET claimed_until = ${utcTimestamp(until)}
    FROM users u
    WHERE ${which} AND u.id = n.user_id
    RETURNING ${CLAIMED_COLUMNS}`;
}

/** Claims one notice by id, unless another sender holds it or it is sent or given up. */
async function claimOne(db: Db, id: string, now: Date, until: Date): Promise<ClaimedNotice | undefined> {
  const [row] = await claimWhere(
    db,
    Prisma.sql`n.id = ${id}
      AND n.sent_at IS NULL AND n.next_attempt_at IS NOT NULL
      AND (n.claimed_until IS NULL OR n.claimed_until <= ${utcTimestamp(now)})`,
    until,
  );
  return row;
}

/** Claims up to `limit` unsent notices that are due and held by nobody; rows another sweep is claiming are skipped. */
function claimDue(db: Db, now: Date, until: Date, limit: number): Promise<ClaimedNotice[]> {
  return claimWhere(
    db,
    Prisma.sql`n.id IN (
        SELECT id FROM security_notices
        WHERE sent_at IS NULL AND next_attempt_at <= ${utcTimestamp(now)}
          AND (claimed_until IS NULL OR claimed_until <= ${utcTimestamp(now)})
        ORDER BY next_attempt_at
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED)`,
    until,
  );
}

/** Sends a claimed notice and records what happened. */
async function deliverClaimed(deps: NoticeSenderDeps, row: ClaimedNotice, until: Date): Promise<NoticeOutcome> {
  const meta = { notice: row.kind, user_id: row.user_id };
  if (isErasedAddress(row.email)) {
    await deps.prisma.securityNotice.deleteMany({ where: { id: row.id } });
    deps.logger.info('Security notice dropped: the account was erased', meta);
    return 'dropped';
  }
  const notice = securityNoticeFromStored(row.kind, row.details);
  let sending: Promise<void> | undefined;
  try {
    // A notice this version cannot render (written by a newer one): failed here, a newer sender may send it.
    if (!notice) throw new Error(`This version cannot render a "${row.kind}" notice`);
    const { subject, text } = renderSecurityNotice(notice, {
      name: row.name,
      at: row.created_at,
      ip: row.ip,
      publicBaseUrl: deps.config.publicBaseUrl,
    });
    await withTimeout(() => (sending = deps.mailer.send({ to: row.email, subject, text })), deps.sendTimeoutMs ?? SECURITY_NOTICE_SEND_TIMEOUT_MS);
  } catch (err) {
    if (!(err instanceof TimeoutError) || !sending) return recordFailure(deps, row, until, err, null);
    // The send goes on: nobody else sends the notice meanwhile, and what it comes to is recorded when it does.
    const held = new Date(deps.clock.now().getTime() + SECURITY_NOTICE_LATE_SEND_CLAIM_MS);
    const outcome = await recordFailure(deps, row, until, err, held);
    void sending.then(
      () => settleLateSend(deps, row, held, { accepted: true }),
      (refusal: unknown) => settleLateSend(deps, row, held, { accepted: false, refusal }),
    );
    return outcome;
  }
  await markSent(deps, row.id);
  return 'sent';
}

/**
 * A notice that is done (sent or given up) keeps its kind, time and address for 30 days, not its details: a key's
 * name and its organization's are copies that GDPR erasure of that organization does not reach (it rewrites the key).
 */
const DONE_DETAILS = {};

function markSent(deps: NoticeSenderDeps, id: string) {
  return deps.prisma.securityNotice.updateMany({
    where: { id, sentAt: null },
    data: { sentAt: deps.clock.now(), nextAttemptAt: null, claimedUntil: null, details: DONE_DETAILS },
  });
}

/**
 * A send that timed out has ended after all. Accepted: the notice is sent (whatever its attempts were recorded as:
 * it must not go again). Refused: the notice is let go (its claim, `held`, if still this sender's), to be tried at
 * the time its failed attempt set.
 */
async function settleLateSend(
  deps: NoticeSenderDeps,
  row: ClaimedNotice,
  held: Date,
  end: { accepted: true } | { accepted: false; refusal: unknown },
): Promise<void> {
  const meta = { notice: row.kind, user_id: row.user_id };
  try {
    if (end.accepted) {
      await markSent(deps, row.id);
      deps.logger.info('Security notice sent after its send had timed out', meta);
      return;
    }
    deps.logger.error('Security notice send failed after it had timed out', { ...meta, error: mailErrorForLog(end.refusal, row.email) });
    await deps.prisma.securityNotice.updateMany({ where: { id: row.id, sentAt: null, claimedUntil: held }, data: { claimedUntil: null } });
  } catch (dbErr) {
    // The claim runs out by itself (SECURITY_NOTICE_LATE_SEND_CLAIM_MS); a notice accepted but not marked may go twice.
    deps.logger.error('Could not record the end of a security notice send', { ...meta, error: String(dbErr) });
  }
}

/**
 * Records a failed attempt while the claim is still this sender's (`until`: one that ran out and was taken over
 * changes nothing), and lets go of the notice, or holds it until `holdUntil` (a send that timed out, still under way).
 */
async function recordFailure(deps: NoticeSenderDeps, row: ClaimedNotice, until: Date, err: unknown, holdUntil: Date | null): Promise<NoticeOutcome> {
  const now = deps.clock.now();
  const attempts = row.attempts + 1;
  const retryAt = securityNoticeRetryAt(row.created_at, attempts, now);
  deps.logger.error('Could not send a security notice', {
    notice: row.kind,
    user_id: row.user_id,
    attempt: attempts,
    error: mailErrorForLog(err, row.email),
  });
  await deps.prisma.securityNotice.updateMany({
    where: { id: row.id, sentAt: null, claimedUntil: until },
    data: { attempts: { increment: 1 }, nextAttemptAt: retryAt, claimedUntil: holdUntil, ...(!retryAt && { details: DONE_DETAILS }) },
  });
  if (retryAt) return 'failed';
  deps.logger.error('Security notice given up: not sent within 24 hours', { notice: row.kind, user_id: row.user_id });
  return 'gave_up';
}

/** Sends one notice now (the API, right after the commit), unless another sender holds it or it is done. */
export async function sendSecurityNotice(deps: NoticeSenderDeps, id: string): Promise<NoticeOutcome> {
  const now = deps.clock.now();
  const until = new Date(now.getTime() + SECURITY_NOTICE_CLAIM_MS);
  const row = await claimOne(deps.prisma, id, now, until);
  if (!row) return 'taken';
  return deliverClaimed(deps, row, until);
}

export interface NoticeSweepResult {
  sent: number;
  failed: number;
  gave_up: number;
}

/** Sends the due notices nobody holds, a batch at a time (side by side), for at most `budgetMs`. */
export async function sweepSecurityNotices(
  deps: NoticeSenderDeps,
  options: { batchSize?: number; budgetMs?: number } = {},
): Promise<NoticeSweepResult> {
  const batchSize = options.batchSize ?? SECURITY_NOTICE_SWEEP_BATCH;
  const deadline = performance.now() + (options.budgetMs ?? SECURITY_NOTICE_SWEEP_BUDGET_MS);
  const result: NoticeSweepResult = { sent: 0, failed: 0, gave_up: 0 };
  for (;;) {
    const now = deps.clock.now();
    const until = new Date(now.getTime() + SECURITY_NOTICE_CLAIM_MS);
    const claimed = await claimDue(deps.prisma, now, until, batchSize);
    const outcomes = await Promise.all(claimed.map((row) => deliverClaimed(deps, row, until)));
    for (const outcome of outcomes) if (outcome === 'sent' || outcome === 'failed' || outcome === 'gave_up') result[outcome] += 1;
    if (claimed.length < batchSize || performance.now() >= deadline) return result;
  }
}
