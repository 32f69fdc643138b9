// GDPR erasure requests (governance:erase to search people, file, confirm, cancel and retry; governance:read to see
// them). Filing stores a request in `previewing` with the pseudonym that will replace the person; the worker's
// erasure job (apps/worker/src/erasure.ts) writes the preview, and nothing changes until an owner or admin
// confirms; the job then erases and writes the receipt. The person's name and e-mail are kept only sealed in the
// request while it is open (the job needs them), never in its readable fields or its audit entries.
//
// A person can be erased when the organization knows them: a current member, a former one (someone who acted or
// was acted on in its audit log, was assigned a finding, or was the subject of an erasure request), or
// a person without an account known by e-mail (an invitee, a report share grantee, a notification recipient). The
// owner cannot be erased while owning the organization (409). One open (or completed) request per person.
import { erasureEmailKey, newId, Prisma, sealErasureSubject, scopedTo, type ErasureRequest, type ErasureSubject } from '@svc/db';
import {
  BLOCKING_ERASURE_STATUSES,
  PSEUDONYM_EMAIL_DOMAIN,
  canCancelErasure,
  canConfirmErasure,
  canRetryErasure,
  isErasedAddress,
  normalizedEmail,
  previewWithoutSamples,
  pseudonymFor,
  retriedErasureStatus,
} from '@svc/domain';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, forbidden, notFound } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';
import { recordAs, type RequestMeta } from '../audit/audit.context';

export function presentErasure(r: ErasureRequest) {
  const progress = r.progress as { step?: string } | null;
  return {
    id: r.id,
    subject: r.subjectUserId ? 'user' : 'email',
    user_id: r.subjectUserId,
    status: r.status,
    pseudonym: { name: r.pseudonymName, email: r.pseudonymEmail },
    requested_by_user_id: r.requestedById,
    confirmed_by_user_id: r.confirmedById,
    attempts: r.attempts,
    error: r.status === 'failed' ? r.error : null,
    preview: (r.preview as object | null) ?? null,
    progress_step: r.status === 'erasing' || r.status === 'failed' ? (progress?.step ?? null) : null,
    receipt: (r.receipt as object | null) ?? null,
    created_at: r.createdAt.toISOString(),
    confirmed_at: r.confirmedAt?.toISOString() ?? null,
    completed_at: r.completedAt?.toISOString() ?? null,
    cancelled_at: r.cancelledAt?.toISOString() ?? null,
  };
}

/** SQL LIKE pattern matching `q` anywhere, its wildcards taken literally. */
const containing = (q: string) => `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
const ERASED = `%@${PSEUDONYM_EMAIL_DOMAIN}`;

/**
 * User ids the organization knows: members, audit actors and targets, assignees. Not invitees: anyone may invite any
 * address, so an invitation says nothing of an account (an invitee is a person known by e-mail, its account is not
 * this organization's to name or erase).
 */
const knownUserIds = (organizationId: string) => `
  SELECT user_id AS id FROM memberships WHERE organization_id = ${organizationId}
  UNION SELECT actor_id FROM audit_events WHERE organization_id = ${organizationId} AND actor_type = 'user' AND actor_id IS NOT NULL
  UNION SELECT target_id FROM audit_events WHERE organization_id = ${organizationId} AND target_type = 'user' AND target_id IS NOT NULL
  UNION SELECT assignee_id FROM findings WHERE organization_id = ${organizationId} AND assignee_id IS NOT NULL`;

/** Addresses of the organization's people without a membership: invitees, share grantees, notification recipients. */
const knownEmails = (organizationId: string) => `
  SELECT email AS e, 'invitee' AS kind FROM invitations WHERE organization_id = ${organizationId}
  UNION ALL SELECT email, 'share_grantee' FROM report_shares WHERE organization_id = ${organizationId} AND kind = 'email' AND email IS NOT NULL
  UNION ALL SELECT unnest(email_recipients), 'recipient' FROM webhook_subscriptions WHERE organization_id = ${organizationId} AND deleted_at IS NULL`;

export interface ErasureCandidate {
  user_id: string | null;
  name: string | null;
  email: string;
  kind: 'member' | 'former_member' | 'invitee' | 'share_grantee' | 'recipient';
  role: string | null;
}

/** People of the organization whose name or e-mail contains `q`: the dashboard picks whom to erase from these. */
export async function searchErasureCandidates(deps: AppDeps, principal: Principal, q: string): Promise<{ data: ErasureCandidate[] }> {
  const like = containing(q.trim());
  const users = await deps.prisma.$queryRawUnsafe<Array<{ id: string; name: string; email: string; role: string | null }>>(
    `WITH known AS (${knownUserIds('$1')})
     SELECT u.id, u.name, u.email, m.role::text AS role FROM known k JOIN users u ON u.id = k.id
     LEFT JOIN memberships m ON m.organization_id = $1 AND m.user_id = u.id
     WHERE (u.name ILIKE $2 OR u.email ILIKE $2) AND u.email NOT ILIKE $3
       -- A former member this organization erased (or started erasing) keeps the account only for other
       -- organizations: the name and address it holds are not this organization's to show again. One with a
       -- request still in preview is shown (nothing is erased yet).
       AND (m.role IS NOT NULL OR NOT EXISTS (
         SELECT 1 FROM erasure_requests er WHERE er.organization_id = $1 AND er.subject_user_id = u.id
           AND er.status IN ('erasing', 'completed', 'failed')))
     ORDER BY m.role IS NULL, u.name, u.id LIMIT 20`,
    principal.organizationId,
    like,
    ERASED,
  );
  const emails = await deps.prisma.$queryRawUnsafe<Array<{ email: string; kind: ErasureCandidate['kind'] }>>(
    `SELECT DISTINCT ON (lower(e)) lower(e) AS email, kind FROM (${knownEmails('$1')}) x
     WHERE e ILIKE $2 AND e NOT ILIKE $3
     ORDER BY lower(e), kind LIMIT 20`,
    principal.organizationId,
    like,
    ERASED,
  );
  // An address of a known user is that user (listed above); any other address is a person without an account here
  // (whether it has an account in another organization is not this organization's to know).
  const userEmails = new Set(users.map((u) => u.email.toLowerCase()));
  return {
    data: [
      ...users.map((u) => ({ user_id: u.id, name: u.name, email: u.email, kind: u.role ? ('member' as const) : ('former_member' as const), role: u.role })),
      ...emails.filter((e) => !userEmails.has(e.email)).map((e) => ({ user_id: null, name: null, email: e.email, kind: e.kind, role: null })),
    ],
  };
}

interface ResolvedSubject {
  subject: ErasureSubject;
  role: string | null;
}

/** The user, when the organization knows them. */
async function knownUser(deps: AppDeps, principal: Principal, userId: string): Promise<ResolvedSubject | null> {
  const db = scopedTo(deps.prisma, principal);
  const user = await deps.prisma.user.findUnique({ where: { id: userId }, select: { id: true, name: true, email: true } });
  if (!user) return null;
  const subject = { userId: user.id, name: user.name, email: user.email };
  const membership = await db.membership.findFirst({ where: { userId }, select: { role: true } });
  if (membership) return { subject, role: membership.role };
  const [audit, assigned, erasure] = await Promise.all([
    db.auditEvent.findFirst({ where: { OR: [{ actorType: 'user', actorId: userId }, { targetType: 'user', targetId: userId }] }, select: { id: true } }),
    db.finding.findFirst({ where: { assigneeId: userId }, select: { id: true } }),
    db.erasureRequest.findFirst({ where: { subjectUserId: userId }, select: { id: true } }),
  ]);
  return audit || assigned || erasure ? { subject, role: null } : null;
}

/** A person by e-mail: the account when the organization knows it, else an address the organization holds. */
async function knownByEmail(deps: AppDeps, principal: Principal, email: string): Promise<ResolvedSubject | null> {
  const address = normalizedEmail(email);
  if (isErasedAddress(address)) return null;
  const account = await deps.prisma.user.findFirst({ where: { email: { equals: address, mode: 'insensitive' } }, select: { id: true } });
  if (account) {
    const asUser = await knownUser(deps, principal, account.id);
    if (asUser) return asUser;
  }
  const [held] = await deps.prisma.$queryRawUnsafe<Array<{ n: number }>>(
    `SELECT count(*)::int AS n FROM (${knownEmails('$1')}) x WHERE lower(e) = $2`,
    principal.organizationId,
    address,
  );
  return held.n > 0 ? { subject: { userId: null, name: null, email: address }, role: null } : null;
}

export async function fileErasure(deps: AppDeps, principal: Principal, input: { user_id?: string; email?: string }, meta: RequestMeta) {
  const person = input.user_id ? await knownUser(deps, principal, input.user_id) : await knownByEmail(deps, principal, input.email!);
  if (!person) throw notFound('Person');
  if (person.role === 'owner') {
    throw conflict('The owner cannot be erased while owning the organization: transfer ownership first.');
  }
  const { subject } = person;
  const emailKey = subject.userId ? null : erasureEmailKey(subject.email, deps.config.encryptionKey);
  const now = deps.clock.now();
  const id = newId('era', now.getTime());
  const pseudonym = pseudonymFor(id);
  const request = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillHolds(tx, principal, 'governance:erase', 'Filing erasure requests');
    // Serializes filings for one person so two concurrent requests cannot both pass the check below.
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${`erasure:${principal.organizationId}:${subject.userId ?? emailKey}`}))`;
    const existing = await tx.erasureRequest.findFirst({
      where: { ...(subject.userId ? { subjectUserId: subject.userId } : { subjectEmailKey: emailKey }), status: { in: [...BLOCKING_ERASURE_STATUSES] } },
      select: { id: true, status: true },
    });
    if (existing) {
      throw conflict(
        existing.status === 'completed'
          ? `This person was already erased (${existing.id}).`
          : `An erasure request for this person is already ${existing.status} (${existing.id}): ${existing.status === 'failed' ? 'retry it' : 'confirm it, wait for it or cancel it'}.`,
      );
    }
    const created = await tx.erasureRequest.create({
      data: {
        id,
        organizationId: principal.organizationId,
        subjectUserId: subject.userId,
        subjectEmailKey: emailKey,
        subjectEnc: sealErasureSubject(subject, deps.config.encryptionKey),
        status: 'previewing',
        pseudonymName: pseudonym.name,
        pseudonymEmail: pseudonym.email,
        requestedById: principal.userId,
        createdAt: now,
      },
    });
    await recordAs(tx, principal, meta, now, {
      action: 'erasure.requested',
      target: { type: 'erasure_request', id },
      metadata: { subject_user_id: subject.userId, pseudonym: pseudonym.name },
    });
    return created;
  }, RECHECKED_TRANSACTION);
  return presentErasure(request);
}

async function requireErasure(deps: AppDeps, principal: Principal, id: string): Promise<ErasureRequest> {
  const request = await scopedTo(deps.prisma, principal).erasureRequest.findFirst({ where: { id } });
  if (!request) throw notFound('Erasure request');
  return request;
}

export async function getErasure(deps: AppDeps, principal: Principal, id: string) {
  return presentErasure(await requireErasure(deps, principal, id));
}

export async function listErasures(deps: AppDeps, principal: Principal, query: PageQuery & { status?: string }) {
  const args = pageArgs(query);
  const where: Prisma.ErasureRequestWhereInput = { ...args.where, ...(query.status && { status: query.status }) };
  const rows = await scopedTo(deps.prisma, principal).erasureRequest.findMany({ ...args, where });
  return toPage(rows, query, presentErasure);
}

type Step = {
  allowed: (status: string) => boolean;
  /** What the step is, for the 403 when the caller's role as committed no longer carries governance:erase. */
  doing: string;
  refusal: string;
  action: 'erasure.cancelled' | 'erasure.retried' | 'erasure.confirmed';
  data: (request: ErasureRequest, now: Date, principal: Principal) => Prisma.ErasureRequestUpdateManyMutationInput;
};

/** Moves a request from one status to another, conditionally on the status read; 409 when the rule refuses. */
async function transition(deps: AppDeps, principal: Principal, id: string, meta: RequestMeta, step: Step) {
  const request = await requireErasure(deps, principal, id);
  if (!step.allowed(request.status)) throw conflict(`${step.refusal} (it is ${request.status}).`);
  const now = deps.clock.now();
  return scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillHolds(tx, principal, 'governance:erase', step.doing);
    // Conditional on the status read above: a request the worker moved meanwhile is refused.
    const { count } = await tx.erasureRequest.updateMany({ where: { id, status: request.status }, data: step.data(request, now, principal) });
    if (count !== 1) throw conflict(`${step.refusal} (its status changed meanwhile).`);
    await recordAs(tx, principal, meta, now, {
      action: step.action,
      target: { type: 'erasure_request', id },
      metadata: { subject_user_id: request.subjectUserId },
    });
    return presentErasure(await tx.erasureRequest.findFirstOrThrow({ where: { id } }));
  }, RECHECKED_TRANSACTION);
}

export function confirmErasure(deps: AppDeps, principal: Principal, id: string, meta: RequestMeta) {
  // governance:erase is an owner and admin scope; a key minted with it by someone since demoted must not confirm.
  if (principal.role !== 'owner' && principal.role !== 'admin') throw forbidden('Only an owner or admin can confirm an erasure.');
  return transition(deps, principal, id, meta, {
    allowed: canConfirmErasure,
    doing: 'Confirming erasure requests',
    refusal: 'Only an erasure request awaiting confirmation can be confirmed',
    action: 'erasure.confirmed',
    data: (_r, now, p) => ({ status: 'erasing', confirmedAt: now, confirmedById: p.userId }),
  });
}

export function cancelErasure(deps: AppDeps, principal: Principal, id: string, meta: RequestMeta) {
  return transition(deps, principal, id, meta, {
    allowed: canCancelErasure,
    doing: 'Cancelling erasure requests',
    refusal: 'Only an erasure request not yet confirmed can be cancelled',
    action: 'erasure.cancelled',
    // Nothing was changed; the sealed name and e-mail go, and so do the preview's excerpts.
    data: (r, now) => ({
      status: 'cancelled',
      cancelledAt: now,
      subjectEnc: null,
      ...(r.preview !== null && { preview: previewWithoutSamples(r.preview) as Prisma.InputJsonValue }),
    }),
  });
}

export function retryErasure(deps: AppDeps, principal: Principal, id: string, meta: RequestMeta) {
  return transition(deps, principal, id, meta, {
    allowed: canRetryErasure,
    doing: 'Retrying erasure requests',
    refusal: 'Only a failed erasure request can be retried',
    action: 'erasure.retried',
    data: (r) => ({ status: retriedErasureStatus(r.confirmedAt !== null), error: null }),
  });
}
