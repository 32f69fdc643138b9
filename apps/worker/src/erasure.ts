// The GDPR erasure job (governance:erase). Each run
// 1. previews the requests in `previewing`: what the erasure would change, counted per table and column with a few
//    masked samples (reads only), then the request waits in `awaiting_confirmation` for an owner or admin;
// 2. erases the confirmed requests (`erasing`) step by step, in short transactions: each transaction takes the
//    request row (FOR UPDATE SKIP LOCKED: one worker per request), does one step or one keyset batch of a table,
//    and records the progress in the request row. A worker killed midway loses at most the batch in flight; the
//    next run resumes after the last recorded key. A request that cannot go on (the person now owns the
//    organization, a database error) is `failed` with the reason, and a retry resumes where it stopped.
//
// What is written, and only in the request's organization (DESIGN.md "Trust boundaries"): the columns the
// personal-data inventory (@svc/domain personal-data-inventory) classifies, selected by the organization's key,
// plus the person's own account when the request names a user who belongs to no other organization. Steps:
// membership (removed as DELETE /members/:id would), references (the person's audit entries: label pseudonymized,
// IP and user agent cleared), e-mail keyed rows (invitations, share grants, notification recipients), the free
// text of each table (exact e-mail always, the name when `searchableName` accepts it), report PDFs rendered from
// changed text (regenerated), the account (with its sign-in identities, tokens and security notices), then the receipt.
import { recordAudit, SYSTEM_ACTOR } from '@svc/audit';
import { lockUserForMembershipChange, openErasureSubject, Prisma, sealErasureSubject, type ErasureSubject, type Tx } from '@svc/db';
import { CONFIGURER_LOST_ROLE_REASON, erasureReplacements, freeTextPasses, normalizedEmail, previewWithoutSamples, type FreeTextPass, type Pseudonym, type TextReplacement } from '@svc/domain';
import { bumpAuthEpochs, createReportQueue, enqueueReport } from '@svc/queue';
import type { WorkerDeps } from './deps';
import { freeTextBatch, freeTextPreview, type PreviewColumn } from './erasure-sql';
import { FREE_TEXT_STEP, REPORTS_STEP } from './erasure-under-way';

/** Requests previewed or erased per run; the next run takes the rest. */
const REQUESTS_PER_RUN = 20;

/**
 * How long one run goes on erasing. The erasure shares the maintenance queue, one job at a time, with the retention
 * purge, the SLA scan and the key lifecycle: a large organization's erasure must not hold them up for minutes. Past
 * the budget a run stops after the step in hand (each run takes at least one step of a request, so every request
 * moves on), with its progress recorded, and the next run (every ERASURE_INTERVAL_MS) resumes there.
 */
export const ERASURE_RUN_BUDGET_MS = 20 * 1000;

export class ErasureRefused extends Error {}

export interface ErasureReceipt {
  membership_removed: boolean;
  account_erased: boolean;
  sessions_revoked: number;
  api_keys_revoked: number;
  /** The pending invitations the person had sent in the organization: revoked with their membership. */
  invitations_revoked: number;
  /** The person's audit entries whose actor label was pseudonymized and IP and user agent cleared. */
  audit_entries_scrubbed: number;
  /** Report PDFs rendered from text that named the person: set back to pending and rendered again. */
  reports_regenerated: string[];
  /** Rows changed per table and column, e.g. {table: 'findings', column: 'description', rows: 3}. */
  replaced: Array<{ table: string; column: string; rows: number }>;
}

export interface ErasurePreview {
  membership: boolean;
  /** The account row itself would be erased (a user who belongs to no other organization). */
  account: boolean;
  /** The name is searched in free text (see searchableName); otherwise only the exact e-mail. */
  name_searched: boolean;
  audit_entries: number;
  reports: number;
  columns: PreviewColumn[];
}

interface Progress {
  step: string;
  /** The last key done of the current free-text pass (keyset), null at its start. */
  cursor: string | null;
  counts: Record<string, number>;
  receipt: Omit<ErasureReceipt, 'replaced'>;
}

interface RequestRow {
  id: string;
  organization_id: string;
  subject_user_id: string | null;
  subject_enc: string | null;
  pseudonym_name: string;
  pseudonym_email: string;
  progress: Progress | null;
}

const FIRST_STEPS = ['membership', 'references', 'email_keyed'] as const;
const LAST_STEPS = [REPORTS_STEP, 'account', 'finish'] as const;
const passStep = (pass: FreeTextPass) => `${FREE_TEXT_STEP}${pass.table}`;

function stepNames(passes: FreeTextPass[]): string[] {
  return [...FIRST_STEPS, ...passes.map(passStep), ...LAST_STEPS];
}

function freshProgress(): Progress {
  return {
    step: FIRST_STEPS[0],
    cursor: null,
    counts: {},
    receipt: { membership_removed: false, account_erased: false, sessions_revoked: 0, api_keys_revoked: 0, invitations_revoked: 0, audit_entries_scrubbed: 0, reports_regenerated: [] },
  };
}

/** The person: sealed in the request; requests filed before subjects were sealed read the account. */
async function subjectOf(deps: WorkerDeps, tx: Tx, req: RequestRow): Promise<ErasureSubject> {
  if (req.subject_enc) return openErasureSubject(req.subject_enc, deps.config.encryptionKey);
  const user = req.subject_user_id ? await tx.user.findUnique({ where: { id: req.subject_user_id }, select: { name: true, email: true } }) : null;
  if (!user) throw new ErasureRefused('The person of this request can no longer be found.');
  return { userId: req.subject_user_id, name: user.name, email: user.email };
}

async function refuseOwner(tx: Tx, organizationId: string, subject: ErasureSubject) {
  if (!subject.userId) return;
  const membership = await tx.membership.findFirst({ where: { organizationId, userId: subject.userId }, select: { role: true } });
  if (membership?.role === 'owner') throw new ErasureRefused('The person owns the organization: transfer ownership, then retry the erasure.');
}

const replacementsFor = (subject: ErasureSubject, pseudonym: Pseudonym): TextReplacement[] =>
  erasureReplacements({ name: subject.name, email: subject.email }, pseudonym);

// ---- references and e-mail keyed rows ----

/** Audit entries whose actor is the person: as a user, through one of their API keys, or through their share grant. */
function personsAuditEntries(organizationId: string, subject: ErasureSubject) {
  const email = normalizedEmail(subject.email);
  return Prisma.sql`
    organization_id = ${organizationId} AND (
      (actor_type = 'user' AND actor_id = ${subject.userId ?? ''})
      OR (actor_type = 'api_key' AND actor_id IN (SELECT id FROM api_keys WHERE organization_id = ${organizationId} AND user_id = ${subject.userId ?? ''}))
      OR (actor_type = 'report_share' AND actor_id IN (SELECT id FROM report_shares WHERE organization_id = ${organizationId} AND kind = 'email' AND lower(email) = ${email})))`;
}

/**
 * The person's audit entries pseudonymized. `lateOnly` (the follow-up): only those still holding an address (its
 * count), and only those recorded before the person rejoined the organization, if they have: what they do once
 * invited back is theirs again, not the erasure's. What the erased credentials record after the rejoin (a request
 * under way with a key of theirs or their share grant, a key an API instance still caches) is not.
 */
async function scrubReferences(tx: Tx, organizationId: string, subject: ErasureSubject, pseudonym: Pseudonym, lateOnly = false): Promise<number> {
  // The membership, if any, is a rejoin: the erasure removed the one they had. An accept records its entry at its
  // membership's created_at (joinInvitedOrganization), so `<` leaves that entry to them too.
  const rejoined = Prisma.sql`COALESCE((SELECT created_at FROM memberships WHERE organization_id = ${organizationId} AND user_id = ${subject.userId ?? ''}), 'infinity')`;
  // Kept after the rejoin: the user's own entries (a session does not show in them) and their keys minted since. A
  // key from before (revoked by the erasure) and a share grant the erasure revoked (it holds the pseudonym) are not theirs again.
  const late = lateOnly
    ? Prisma.sql`AND (ip IS NOT NULL OR user_agent IS NOT NULL OR (actor_type IN ('user', 'report_share') AND actor_label IS DISTINCT FROM ${pseudonym.email}))
        AND (created_at < ${rejoined} OR actor_type = 'report_share'
          OR (actor_type = 'api_key' AND actor_id IN (SELECT id FROM api_keys WHERE organization_id = ${organizationId} AND user_id = ${subject.userId ?? ''} AND created_at < ${rejoined})))`
    : Prisma.empty;
  return tx.$executeRaw`
    UPDATE audit_events SET
      actor_label = CASE WHEN actor_type IN ('user', 'report_share') THEN ${pseudonym.email} ELSE actor_label END,
      ip = NULL, user_agent = NULL
    WHERE ${personsAuditEntries(organizationId, subject)} ${late}`;
}

async function replaceEmailKeyed(tx: Tx, organizationId: string, subject: ErasureSubject, pseudonym: Pseudonym, now: Date) {
  const email = normalizedEmail(subject.email);
  // An invitation to the address can no longer be accepted; a share grant to it is revoked.
  const invitations = await tx.$executeRaw`
    UPDATE invitations SET email = ${pseudonym.email}, expires_at = LEAST(expires_at, ${now})
    WHERE organization_id = ${organizationId} AND lower(email) = ${email}`;
  const shares = await tx.$executeRaw`
    UPDATE report_shares SET email = ${pseudonym.email}, revoked_at = COALESCE(revoked_at, ${now})
    WHERE organization_id = ${organizationId} AND kind = 'email' AND lower(email) = ${email}`;
  // The address leaves the recipient lists (the other recipients stay, in order).
  const recipients = await tx.$executeRaw`
    UPDATE webhook_subscriptions SET email_recipients = ARRAY(
      SELECT x FROM unnest(email_recipients) WITH ORDINALITY AS u(x, n) WHERE lower(x) <> ${email} ORDER BY n)
    WHERE organization_id = ${organizationId} AND EXISTS (SELECT 1 FROM unnest(email_recipients) AS r(x) WHERE lower(x) = ${email})`;
  return { 'invitations.email': invitations, 'report_shares.email': shares, 'webhook_subscriptions.email_recipients': recipients };
}

// ---- membership, reports and account ----

/** Removes a current member from the organization, as DELETE /members/:id does. */
async function removeMembership(tx: Tx, organizationId: string, userId: string, now: Date) {
  const { count } = await tx.membership.deleteMany({ where: { organizationId, userId } });
  await tx.teamMember.deleteMany({ where: { userId, team: { organizationId } } });
  await tx.accessGrant.deleteMany({ where: { organizationId, userId } });
  const sessions = await tx.session.updateMany({ where: { organizationId, userId, revokedAt: null }, data: { revokedAt: now } });
  const keys = await tx.apiKey.updateMany({
    where: { organizationId, userId, revokedAt: null },
    data: { revokedAt: now, revokedReason: 'member_erased' },
  });
  await disableRoutesConfiguredBy(tx, organizationId, userId, now);
  // The invitations they sent and nobody accepted yet stop too, as on DELETE /members/:id.
  const invitations = await tx.invitation.deleteMany({ where: { organizationId, invitedById: userId, acceptedAt: null } });
  return { removed: count > 0, sessions: sessions.count, apiKeys: keys.count, invitations: invitations.count };
}

/** The routes they last configured stop, as when DELETE /members/:id removes them (docs/api.md, "Who may route events"). */
async function disableRoutesConfiguredBy(tx: Tx, organizationId: string, userId: string, now: Date) {
  const where = { organizationId, configuredByUserId: userId, deletedAt: null, status: { not: 'disabled' as const } };
  const routes = await tx.webhookSubscription.findMany({ where, select: { id: true, kind: true, level: true, projectId: true, assessmentId: true } });
  if (routes.length === 0) return;
  await tx.webhookSubscription.updateMany({
    where: { ...where, id: { in: routes.map((r) => r.id) } },
    data: { status: 'disabled', disabledReason: CONFIGURER_LOST_ROLE_REASON },
  });
  for (const r of routes) {
    await recordAudit(tx, {
      organizationId,
      actor: SYSTEM_ACTOR,
      action: 'webhook.subscription_disabled',
      target: { type: r.kind === 'webhook' ? 'webhook_subscription' : 'notification_target', id: r.id },
      metadata: { kind: r.kind, level: r.level, project_id: r.projectId, assessment_id: r.assessmentId, disabled_reason: CONFIGURER_LOST_ROLE_REASON },
      at: now,
    });
  }
}

/**
 * Reports of the organization whose PDF holds text matching `needle` (a regex: the person in the preview, the
 * pseudonym once the free text is rewritten, report_rendered_texts included), or may:
 * - ready ones by the text their PDF was rendered from (report_rendered_texts), whatever the project, assessment
 *   or findings became since;
 * - pending ones by their current text: a render under way may have read it before it was rewritten;
 * - ready ones rendered before that text was kept (no row): by their current text, or when their project,
 *   assessment or findings changed after the render (what the PDF holds cannot be told then).
 */
function reportsRenderedFrom(organizationId: string, needle: string) {
  return Prisma.sql`
    SELECT r.id FROM reports r
    JOIN assessments a ON a.id = r.assessment_id
    JOIN projects p ON p.id = a.project_id
    LEFT JOIN report_rendered_texts rt ON rt.report_id = r.id
    WHERE r.organization_id = ${organizationId} AND r.status IN ('ready', 'pending') AND (
      (r.status = 'ready' AND rt.report_id IS NOT NULL AND rt.text ~* ${needle})
      OR ((r.status = 'pending' OR rt.report_id IS NULL) AND (
        r.title ~* ${needle} OR a.name ~* ${needle} OR p.name ~* ${needle}
        OR EXISTS (SELECT 1 FROM findings f WHERE f.assessment_id = a.id
                   AND (f.title ~* ${needle} OR f.location ~* ${needle} OR f.description ~* ${needle}))))
      OR (r.status = 'ready' AND rt.report_id IS NULL AND (p.updated_at > r.ready_at OR a.updated_at > r.ready_at
          OR EXISTS (SELECT 1 FROM findings f WHERE f.assessment_id = a.id AND f.updated_at > r.ready_at))))
    ORDER BY r.id`;
}

const anyPattern = (replacements: TextReplacement[]) => replacements.map((r) => `(?:${r.pattern})`).join('|');
const escapeRegex = (s: string) => s.replace(/[\\^$.|?*+()[\]{}]/g, (c) => `\\${c}`);

/**
 * After the free text changed, the reports rendered before it hold the person: they are rendered again. A pending
 * report is touched (updated_at moves on, never back): a render that read the old text cannot store its PDF
 * (report-job.ts stores only a row unchanged since it read it) and renders again.
 */
async function regenerateReports(tx: Tx, organizationId: string, subject: ErasureSubject, pseudonym: Pseudonym, now: Date): Promise<string[]> {
  // The pseudonym the passes wrote, and the person too: a PDF stored after the passes (a render that read the text
  // before them, while the request was not holding reports) holds the person, and its kept text with it.
  const needle = `${escapeRegex(pseudonym.email)}|${escapeRegex(pseudonym.name)}|${anyPattern(replacementsFor(subject, pseudonym))}`;
  const rows = await tx.$queryRaw<Array<{ id: string }>>(reportsRenderedFrom(organizationId, needle));
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  // The text kept beside each PDF goes with it (it holds the pseudonym now; the new render keeps its own).
  await tx.$executeRaw`DELETE FROM report_rendered_texts WHERE report_id = ANY(${ids}::text[])`;
  await tx.$executeRaw`
    UPDATE reports SET status = 'pending', pdf = NULL, size_bytes = NULL, ready_at = NULL, error = NULL,
           unfinished_renders = CASE WHEN status = 'ready' THEN 0 ELSE unfinished_renders END,
           updated_at = GREATEST(${now}, updated_at + interval '1 millisecond')
     WHERE id = ANY(${ids}::text[]) AND organization_id = ${organizationId} AND status IN ('ready', 'pending')`;
  return ids;
}

async function lockAccountForErasure(tx: Tx, userId: string) {
  await tx.$queryRaw`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`;
}

/** The account goes: no credential, no sign-in identity, no token is left; the row keeps only the pseudonym. */
async function eraseAccount(tx: Tx, userId: string, pseudonym: Pseudonym, now: Date) {
  // The user's row first, as every change of credentials takes it (a password reset locks it, then claims or issues
  // its e-mail token): deleting the tokens before would deadlock with a reset under way. FOR UPDATE: the address, a
  // unique key, changes below.
  await lockAccountForErasure(tx, userId);
  await tx.oAuthIdentity.deleteMany({ where: { userId } });
  await tx.personalSourceConnection.deleteMany({ where: { userId } });
  await tx.emailToken.deleteMany({ where: { userId } });
  // Its security notices, sent or not: they name the account's keys and organizations and where it signed in from.
  await tx.securityNotice.deleteMany({ where: { userId } });
  const sessions = await tx.session.updateMany({ where: { userId, revokedAt: null }, data: { revokedAt: now } });
  await tx.user.update({
    where: { id: userId },
    data: { name: pseudonym.name, email: pseudonym.email, passwordHash: null, totpSecretEnc: null, totpPendingEnc: null, totpEnabled: false, totpLastStep: null },
  });
  return sessions.count;
}

// ---- preview ----

async function preview(deps: WorkerDeps, tx: Tx, req: RequestRow, subject: ErasureSubject): Promise<ErasurePreview> {
  await refuseOwner(tx, req.organization_id, subject);
  const pseudonym = { name: req.pseudonym_name, email: req.pseudonym_email };
  const replacements = replacementsFor(subject, pseudonym);
  const columns: PreviewColumn[] = [];
  const email = normalizedEmail(subject.email);
  const keyed = await tx.$queryRaw<Array<{ t: string; n: number }>>`
    SELECT 'invitations' AS t, count(*)::int AS n FROM invitations WHERE organization_id = ${req.organization_id} AND lower(email) = ${email}
    UNION ALL SELECT 'report_shares', count(*)::int FROM report_shares WHERE organization_id = ${req.organization_id} AND kind = 'email' AND lower(email) = ${email}
    UNION ALL SELECT 'webhook_subscriptions', count(*)::int FROM webhook_subscriptions
      WHERE organization_id = ${req.organization_id} AND EXISTS (SELECT 1 FROM unnest(email_recipients) AS r(x) WHERE lower(x) = ${email})`;
  for (const k of keyed) {
    if (k.n > 0) columns.push({ table: k.t, column: k.t === 'webhook_subscriptions' ? 'email_recipients' : 'email', rows: k.n, samples: [] });
  }
  for (const pass of freeTextPasses()) columns.push(...(await freeTextPreview(tx, pass, req.organization_id, replacements)));
  const [audit] = await tx.$queryRaw<Array<{ n: number }>>`SELECT count(*)::int AS n FROM audit_events WHERE ${personsAuditEntries(req.organization_id, subject)}`;
  const reports = await tx.$queryRaw<Array<{ id: string }>>(reportsRenderedFrom(req.organization_id, anyPattern(replacements)));
  const membership = subject.userId ? (await tx.membership.count({ where: { organizationId: req.organization_id, userId: subject.userId } })) > 0 : false;
  const elsewhere = subject.userId
    ? await tx.membership.count({ where: { userId: subject.userId, organizationId: { not: req.organization_id } } })
    : 1;
  return {
    membership,
    account: subject.userId !== null && elsewhere === 0,
    name_searched: replacements.some((r) => r.what === 'name'),
    audit_entries: audit.n,
    reports: reports.length,
    columns,
  };
}

/** Reads only, outside any transaction; the result is stored only if the request is still being previewed. */
async function previewOne(deps: WorkerDeps, requestId: string): Promise<boolean> {
  const [req] = await deps.prisma.$queryRaw<RequestRow[]>`
    SELECT id, organization_id, subject_user_id, subject_enc, pseudonym_name, pseudonym_email, progress FROM erasure_requests
    WHERE id = ${requestId} AND status = 'previewing'`;
  if (!req) return false;
  const subject = await subjectOf(deps, deps.prisma, req);
  const result = await preview(deps, deps.prisma, req, subject);
  const { count } = await deps.prisma.erasureRequest.updateMany({
    where: { id: req.id, status: 'previewing' },
    data: {
      status: 'awaiting_confirmation',
      preview: result as unknown as Prisma.InputJsonValue,
      error: null,
      // A request filed before subjects were sealed gets its subject now: the erasure must find the person even
      // after the account row took the pseudonym.
      ...(req.subject_enc === null && { subjectEnc: sealErasureSubject(subject, deps.config.encryptionKey) }),
    },
  });
  return count === 1;
}

// ---- erasing, one step or batch per transaction ----

async function claim(tx: Tx, requestId: string, status: string): Promise<RequestRow | null> {
  const [req] = await tx.$queryRaw<RequestRow[]>`
    SELECT id, organization_id, subject_user_id, subject_enc, pseudonym_name, pseudonym_email, progress FROM erasure_requests
    WHERE id = ${requestId} AND status = ${status} FOR UPDATE SKIP LOCKED`;
  return req ?? null;
}

type StepOutcome = { progress: Progress; done: boolean; authChanged?: { organizationId: string; userId: string } };

/** Runs the current step (or one batch of it) and returns the progress to record. */
async function advance(deps: WorkerDeps, tx: Tx, req: RequestRow, passes: FreeTextPass[]): Promise<StepOutcome> {
  const progress: Progress = req.progress ?? freshProgress();
  const steps = stepNames(passes);
  const subject = await subjectOf(deps, tx, req);
  const pseudonym = { name: req.pseudonym_name, email: req.pseudonym_email };
  const now = deps.clock.now();
  const next = (): Progress => ({ ...progress, step: steps[steps.indexOf(progress.step) + 1] ?? 'finish', cursor: null });
  const add = (key: string, n: number) => {
    if (n > 0) progress.counts[key] = (progress.counts[key] ?? 0) + n;
  };
  let authChanged: StepOutcome['authChanged'];

  if (!steps.includes(progress.step)) {
    // The inventory changed between two runs (a deployment): the free text is walked again (replacing is idempotent).
    return { progress: { ...progress, step: passStep(passes[0]), cursor: null }, done: false };
  }
  switch (progress.step) {
    case 'membership': {
      // The person's row first (apps/api audit.context.ts recordInUserOrganizations and auth/login.ts hold it FOR SHARE
      // from reading their memberships to their commit): an entry or session is committed before they leave, and
      // scrubbed or revoked here, or reads the memberships after and is not written in this organization.
      if (subject.userId) await lockUserForMembershipChange(tx, subject.userId);
      await refuseOwner(tx, req.organization_id, subject);
      if (subject.userId) {
        const removal = await removeMembership(tx, req.organization_id, subject.userId, now);
        progress.receipt.membership_removed = removal.removed;
        progress.receipt.sessions_revoked += removal.sessions;
        progress.receipt.api_keys_revoked += removal.apiKeys;
        // `?? 0`: the progress of a request started before receipts counted invitations.
        progress.receipt.invitations_revoked = (progress.receipt.invitations_revoked ?? 0) + removal.invitations;
        authChanged = { organizationId: req.organization_id, userId: subject.userId };
      }
      return { progress: next(), done: false, authChanged };
    }
    case 'references':
      progress.receipt.audit_entries_scrubbed += await scrubReferences(tx, req.organization_id, subject, pseudonym);
      return { progress: next(), done: false };
    case 'email_keyed':
      for (const [key, n] of Object.entries(await replaceEmailKeyed(tx, req.organization_id, subject, pseudonym, now))) add(key, n);
      return { progress: next(), done: false };
    case 'reports':
      progress.receipt.reports_regenerated = await regenerateReports(tx, req.organization_id, subject, pseudonym, now);
      return { progress: next(), done: false };
    case 'account': {
      // The row before the count (eraseAccount takes it again): an invitation accepted meanwhile holds it until its
      // membership commits (apps/api invitations.service.ts joinInvitedOrganization), so the count sees
      // that membership and the account stays, or the accept comes after and finds the account erased.
      if (subject.userId) await lockAccountForErasure(tx, subject.userId);
      const elsewhere = subject.userId ? await tx.membership.count({ where: { userId: subject.userId } }) : 1;
      if (subject.userId && elsewhere === 0) {
        add('users.email', 1);
        add('users.name', 1);
        progress.receipt.sessions_revoked += await eraseAccount(tx, subject.userId, pseudonym, now);
        progress.receipt.account_erased = true;
      }
      return { progress: next(), done: false };
    }
    case 'finish':
      await finish(tx, req, progress, subject, now);
      return { progress, done: true };
    default: {
      const pass = passes.find((p) => passStep(p) === progress.step)!;
      const batch = await freeTextBatch(tx, pass, req.organization_id, replacementsFor(subject, pseudonym), progress.cursor, deps.config.erasure.batchSize);
      pass.columns.forEach((c, i) => add(`${pass.table}.${c.column}`, batch.changed[i]));
      if (batch.lastKey === null) return { progress: next(), done: false };
      return { progress: { ...progress, cursor: batch.lastKey }, done: false };
    }
  }
}

function receiptOf(progress: Progress): ErasureReceipt {
  const replaced = Object.entries(progress.counts).map(([key, rows]) => {
    const [table, column] = key.split('.');
    return { table, column, rows };
  });
  return { ...progress.receipt, replaced };
}

async function finish(tx: Tx, req: RequestRow, progress: Progress, subject: ErasureSubject, now: Date) {
  const receipt = receiptOf(progress);
  const [{ preview }] = await tx.$queryRaw<Array<{ preview: unknown }>>`SELECT preview FROM erasure_requests WHERE id = ${req.id}`;
  await tx.erasureRequest.update({
    where: { id: req.id },
    // The sealed name and e-mail go, and so do the preview's excerpts: nothing of the person is left in the request.
    data: {
      status: 'completed',
      receipt: receipt as unknown as Prisma.InputJsonValue,
      preview: preview ? (previewWithoutSamples(preview) as Prisma.InputJsonValue) : Prisma.DbNull,
      progress: Prisma.DbNull,
      subjectEnc: null,
      completedAt: now,
      error: null,
      attempts: { increment: 1 },
    },
  });
  await recordAudit(tx, {
    organizationId: req.organization_id,
    actor: SYSTEM_ACTOR,
    action: 'erasure.completed',
    target: { type: 'erasure_request', id: req.id },
    metadata: {
      subject_user_id: subject.userId,
      pseudonym: req.pseudonym_name,
      tables: new Set(receipt.replaced.map((r) => r.table)).size,
      account_erased: receipt.account_erased,
      invitations_revoked: receipt.invitations_revoked,
      reports_regenerated: receipt.reports_regenerated,
    },
    at: now,
  });
}

interface EraseOutcome {
  completed: boolean;
  reports: string[];
  authChanged: Array<{ organizationId: string; userId: string }>;
}

/** Erases one confirmed request, batch after batch, until it completes or another worker holds it. */
/**
 * Erases one request step by step until done, paused by the deadline, or failed; what its committed steps changed
 * goes into `outcome` as they commit, so a step that fails later does not lose it (afterErasure still tells the API).
 */
async function eraseOne(deps: WorkerDeps, requestId: string, deadline: number, outcome: EraseOutcome): Promise<void> {
  const passes = freeTextPasses();
  for (let steps = 0; ; steps += 1) {
    if (steps > 0 && performance.now() >= deadline) {
      deps.logger.info('Erasure paused: the run spent its time budget; the next run resumes it', { erasure_request_id: requestId, steps });
      return;
    }
    const step = await deps.prisma.$transaction(
      async (tx) => {
        const req = await claim(tx, requestId, 'erasing');
        if (!req) return null;
        const result = await advance(deps, tx, req, passes);
        if (!result.done) {
          await tx.erasureRequest.update({ where: { id: req.id }, data: { progress: result.progress as unknown as Prisma.InputJsonValue } });
        }
        return result;
      },
      { timeout: 60_000, maxWait: 30_000 },
    );
    if (!step) return;
    if (step.authChanged) outcome.authChanged.push(step.authChanged);
    if (step.done) {
      outcome.completed = true;
      outcome.reports = step.progress.receipt.reports_regenerated;
      return;
    }
  }
}

async function markFailed(deps: WorkerDeps, requestId: string, from: 'previewing' | 'erasing', err: unknown): Promise<void> {
  const now = deps.clock.now();
  const refused = err instanceof ErasureRefused ? err.message : 'The erasure could not be completed; retry it.';
  deps.logger.error('Erasure failed', { erasure_request_id: requestId, error: err instanceof Error ? err.message : String(err) });
  await deps.prisma.$transaction(async (tx) => {
    // Stopped in the middle of its free-text passes or at its reports step, it holds the organization's reports and
    // SLA breaches (erasure-under-way.ts): the admin is told.
    const stoppedAt = await tx.erasureRequest.findUnique({ where: { id: requestId }, select: { progress: true } });
    const step = (stoppedAt?.progress as { step?: unknown } | null)?.step;
    const reason =
      typeof step === 'string' && (step.startsWith(FREE_TEXT_STEP) || step === REPORTS_STEP)
        ? `${refused} Until it completes, no report is rendered and no SLA breach is published in this organization.`
        : refused;
    const { count } = await tx.erasureRequest.updateMany({
      where: { id: requestId, status: from },
      data: { status: 'failed', error: reason, attempts: { increment: 1 } },
    });
    if (count !== 1) return;
    const req = await tx.erasureRequest.findUniqueOrThrow({ where: { id: requestId }, select: { organizationId: true, subjectUserId: true } });
    await recordAudit(tx, {
      organizationId: req.organizationId,
      actor: SYSTEM_ACTOR,
      action: 'erasure.failed',
      target: { type: 'erasure_request', id: requestId },
      metadata: { subject_user_id: req.subjectUserId, reason },
      at: now,
    });
  });
}

export interface ErasureRunResult {
  previewed: number;
  completed: number;
  failed: number;
}

/** After commit: API caches forget the removed member's keys and sessions; regenerated reports are rendered. */
async function afterErasure(deps: WorkerDeps, requestId: string, outcome: EraseOutcome, redis: () => ReturnType<WorkerDeps['redis']>) {
  try {
    for (const a of outcome.authChanged) {
      await bumpAuthEpochs(redis(), deps.config.redisPrefix, { organizationIds: [a.organizationId], userIds: [a.userId] });
    }
    if (outcome.reports.length > 0) {
      const queue = createReportQueue(redis(), deps.config);
      try {
        for (const id of outcome.reports) await enqueueReport(queue, id);
      } finally {
        await queue.close();
      }
    }
  } catch (err) {
    // The report relay renders pending reports it finds without a job; API caches expire within their TTL.
    deps.logger.error('Could not notify the API caches or enqueue regenerated reports after an erasure', { erasure_request_id: requestId, error: String(err) });
  }
}

/**
 * One run of the erasure job: previews, then confirmed erasures, each request on its own, within `budgetMs`
 * (ERASURE_RUN_BUDGET_MS): the requests it did not reach, and the rest of one it paused, go on with the next run.
 */
export async function runErasures(deps: WorkerDeps, budgetMs = ERASURE_RUN_BUDGET_MS): Promise<ErasureRunResult> {
  const deadline = performance.now() + budgetMs;
  const result: ErasureRunResult = { previewed: 0, completed: 0, failed: 0 };
  // Previews first (reads only, and a person waits for each to confirm), then erasures, oldest first. Each kind has
  // its own share of the run and its own first step: previews filed faster than a run takes them, or slow enough to
  // spend the budget, must not keep a confirmed erasure (another organization's, say) waiting for ever.
  const waiting = (status: 'previewing' | 'erasing') =>
    deps.prisma.erasureRequest.findMany({ where: { status }, select: { id: true }, orderBy: { createdAt: 'asc' }, take: REQUESTS_PER_RUN });
  let connection: ReturnType<WorkerDeps['redis']> | undefined;
  const redis = () => (connection ??= deps.redis());
  try {
    for (const [index, { id }] of (await waiting('previewing')).entries()) {
      if (index > 0 && performance.now() >= deadline) break;
      try {
        if (await previewOne(deps, id)) result.previewed += 1;
      } catch (err) {
        result.failed += 1;
        await markFailed(deps, id, 'previewing', err);
      }
    }
    for (const [index, { id }] of (await waiting('erasing')).entries()) {
      if (index > 0 && performance.now() >= deadline) break;
      const outcome: EraseOutcome = { completed: false, reports: [], authChanged: [] };
      try {
        await eraseOne(deps, id, deadline, outcome);
        if (outcome.completed) {
          result.completed += 1;
          deps.logger.info('Erasure completed', { erasure_request_id: id });
        }
      } catch (err) {
        result.failed += 1;
        await markFailed(deps, id, 'erasing', err);
      } finally {
        // Also after a failure: a membership removed by a step that committed before it is forgotten by the API now.
        await afterErasure(deps, id, outcome, redis);
      }
    }
  } finally {
    await connection?.quit().catch(() => undefined);
  }
  return result;
}

// ---- follow-up ----

/**
 * How long after an erasure completes its follow-up runs: longer than a request already under way then can go on
 * writing in the organization as the person. The API forgets their sessions and keys when the erasure tells it
 * (afterErasure), or within API_KEY_CACHE_TTL_SECONDS (at most 5 min) if that message is lost; a request's writes
 * commit within its transaction's bound, the longest being a subscription's deletion (apps/api subscriptions.service.ts
 * DELETION_TRANSACTION, 10 min). Nothing bounds a handler's time before its transaction starts: this is a bound
 * on practice, not a guarantee.
 */
export const ERASURE_FOLLOW_UP_DELAY_MS = 15 * 60 * 1000;

interface CompletedRow {
  id: string;
  organization_id: string;
  subject_user_id: string | null;
  pseudonym_name: string;
  pseudonym_email: string;
}

/**
 * The follow-up of completed erasures. The membership step does not wait for requests in flight: one authenticated
 * as the person before it (a session or API key of theirs, their share link) that commits after the erasure leaves
 * an audit entry with their IP and user agent, and their address as its label when the account stays (a member
 * elsewhere). Once no such request can be left (ERASURE_FOLLOW_UP_DELAY_MS), the person's entries in the
 * organization are scrubbed again, found by the user id and by the share grants that now hold the pseudonym; the
 * receipt counts them as `late_audit_entries_scrubbed`. A person invited back within the delay keeps what they
 * recorded after rejoining. Returns how many requests were followed up.
 */
export async function followUpCompletedErasures(deps: WorkerDeps): Promise<number> {
  const due = new Date(deps.clock.now().getTime() - ERASURE_FOLLOW_UP_DELAY_MS);
  const requests = await deps.prisma.erasureRequest.findMany({
    where: { status: 'completed', followedUpAt: null, completedAt: { lte: due } },
    select: { id: true },
    orderBy: { completedAt: 'asc' },
    take: REQUESTS_PER_RUN,
  });
  let followedUp = 0;
  for (const { id } of requests) {
    let late: number | null;
    try {
      late = await followUpOne(deps, id);
    } catch (err) {
      // Logged, and the others go on: a request failing first in every run must not keep every later one waiting.
      deps.logger.error('Erasure follow-up failed; the next run retries it', { erasure_request_id: id, error: err instanceof Error ? err.message : String(err) });
      continue;
    }
    if (late === null) continue;
    followedUp += 1;
    if (late > 0) deps.logger.info('Erasure follow-up scrubbed audit entries written after it completed', { erasure_request_id: id, entries: late });
  }
  return followedUp;
}

/** One request's follow-up: the entries scrubbed, or null when it is not (or no longer) due or another worker has it. */
async function followUpOne(deps: WorkerDeps, requestId: string): Promise<number | null> {
  return deps.prisma.$transaction(
    async (tx) => {
      const [req] = await tx.$queryRaw<CompletedRow[]>`
        SELECT id, organization_id, subject_user_id, pseudonym_name, pseudonym_email FROM erasure_requests
        WHERE id = ${requestId} AND status = 'completed' AND followed_up_at IS NULL FOR UPDATE SKIP LOCKED`;
      if (!req) return null;
      const pseudonym = { name: req.pseudonym_name, email: req.pseudonym_email };
      const subject: ErasureSubject = { userId: req.subject_user_id, name: pseudonym.name, email: pseudonym.email };
      const scrubbed = await scrubReferences(tx, req.organization_id, subject, pseudonym, true);
      await tx.$executeRaw`
        UPDATE erasure_requests SET followed_up_at = ${deps.clock.now()},
          receipt = COALESCE(receipt, '{}'::jsonb) || jsonb_build_object('late_audit_entries_scrubbed', ${scrubbed}::int)
        WHERE id = ${req.id}`;
      return scrubbed;
    },
    // The erasure's own bounds (eraseOne), not Prisma's default 5 s: the scan of a large organization's audit log,
    // or its rows held by another worker's erasure batch in the same organization, can take longer.
    { timeout: 60_000, maxWait: 30_000 },
  );
}
