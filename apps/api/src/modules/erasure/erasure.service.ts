// GDPR erasure requests (governance:erase to file, cancel and retry; governance:read to see them). Filing stores a
// pending request with the pseudonym that will replace the person; the worker's erasure job
// (apps/worker/src/erasure.ts) does the erasure and writes the receipt. The request never stores the person's
// name or e-mail, and neither do its audit entries: only the user id and the pseudonym.
//
// A person can be erased when the organization knows them: a current member, or a former one (someone who acted
// or was acted on in its audit log, was invited, was assigned a finding, or was the subject of an erasure request). The owner cannot be erased while
// owning the organization (409): ownership must be transferred first. One open (pending or failed) request per
// person; a person already erased is 409.
import type { ErasureRequest, Prisma } from '@svc/db';
import { newId, scopedTo } from '@svc/db';
import { canCancelErasure, canRetryErasure, pseudonymFor } from '@svc/domain';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, notFound } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { recordAs, type RequestMeta } from '../audit/audit.context';

export function presentErasure(r: ErasureRequest) {
  return {
    id: r.id,
    user_id: r.subjectUserId,
    status: r.status,
    pseudonym: { name: r.pseudonymName, email: r.pseudonymEmail },
    requested_by_user_id: r.requestedById,
    attempts: r.attempts,
    error: r.status === 'failed' ? r.error : null,
    receipt: (r.receipt as object | null) ?? null,
    created_at: r.createdAt.toISOString(),
    completed_at: r.completedAt?.toISOString() ?? null,
    cancelled_at: r.cancelledAt?.toISOString() ?? null,
  };
}

/** True when the user is, or was, part of the organization's records. */
async function knownToOrganization(deps: AppDeps, principal: Principal, userId: string): Promise<{ role: string | null } | null> {
  const db = scopedTo(deps.prisma, principal);
  const user = await deps.prisma.user.findUnique({ where: { id: userId }, select: { email: true } });
  if (!user) return null;
  const membership = await db.membership.findFirst({ where: { userId }, select: { role: true } });
  if (membership) return { role: membership.role };
  const [audit, invitation, assigned, erasure] = await Promise.all([
    db.auditEvent.findFirst({ where: { OR: [{ actorId: userId }, { targetType: 'user', targetId: userId }] }, select: { id: true } }),
    db.invitation.findFirst({ where: { email: user.email }, select: { id: true } }),
    db.finding.findFirst({ where: { assigneeId: userId }, select: { id: true } }),
    db.erasureRequest.findFirst({ where: { subjectUserId: userId }, select: { id: true } }),
  ]);
  return audit || invitation || assigned || erasure ? { role: null } : null;
}

export async function fileErasure(deps: AppDeps, principal: Principal, input: { user_id: string }, meta: RequestMeta) {
  const person = await knownToOrganization(deps, principal, input.user_id);
  if (!person) throw notFound('Person');
  if (person.role === 'owner') {
    throw conflict('The owner cannot be erased while owning the organization: transfer ownership first.');
  }
  const now = deps.clock.now();
  const id = newId('era', now.getTime());
  const pseudonym = pseudonymFor(id);
  const request = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // Serializes filings for one person so two concurrent requests cannot both pass the check below.
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${`erasure:${principal.organizationId}:${input.user_id}`}))`;
    const existing = await tx.erasureRequest.findFirst({
      where: { subjectUserId: input.user_id, status: { in: ['pending', 'failed', 'completed'] } },
      select: { id: true, status: true },
    });
    if (existing) {
      throw conflict(
        existing.status === 'completed'
          ? `This person was already erased (${existing.id}).`
          : `An erasure request for this person is already ${existing.status} (${existing.id}): ${existing.status === 'failed' ? 'retry it' : 'wait for it or cancel it'}.`,
      );
    }
    const created = await tx.erasureRequest.create({
      data: {
        id,
        organizationId: principal.organizationId,
        subjectUserId: input.user_id,
        status: 'pending',
        pseudonymName: pseudonym.name,
        pseudonymEmail: pseudonym.email,
        requestedById: principal.userId,
        createdAt: now,
      },
    });
    await recordAs(tx, principal, meta, now, {
      action: 'erasure.requested',
      target: { type: 'erasure_request', id },
      metadata: { subject_user_id: input.user_id, pseudonym: pseudonym.name },
    });
    return created;
  });
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

/** Moves a request from one status to another, conditionally on the status read; 409 when the rule refuses. */
async function transition(
  deps: AppDeps,
  principal: Principal,
  id: string,
  meta: RequestMeta,
  step: { allowed: (status: string) => boolean; refusal: string; to: 'cancelled' | 'pending'; action: 'erasure.cancelled' | 'erasure.retried' },
) {
  const request = await requireErasure(deps, principal, id);
  if (!step.allowed(request.status)) throw conflict(`${step.refusal} (it is ${request.status}).`);
  const now = deps.clock.now();
  return scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // Conditional on the status read above: the worker holds the row while erasing, so a cancel waits for it and
    // then finds the request completed.
    const { count } = await tx.erasureRequest.updateMany({
      where: { id, status: request.status },
      data: step.to === 'cancelled' ? { status: 'cancelled', cancelledAt: now } : { status: 'pending', error: null },
    });
    if (count !== 1) throw conflict(`${step.refusal} (its status changed meanwhile).`);
    await recordAs(tx, principal, meta, now, {
      action: step.action,
      target: { type: 'erasure_request', id },
      metadata: { subject_user_id: request.subjectUserId },
    });
    return presentErasure(await tx.erasureRequest.findFirstOrThrow({ where: { id } }));
  });
}

export function cancelErasure(deps: AppDeps, principal: Principal, id: string, meta: RequestMeta) {
  return transition(deps, principal, id, meta, {
    allowed: canCancelErasure,
    refusal: 'Only a pending erasure request can be cancelled',
    to: 'cancelled',
    action: 'erasure.cancelled',
  });
}

export function retryErasure(deps: AppDeps, principal: Principal, id: string, meta: RequestMeta) {
  return transition(deps, principal, id, meta, {
    allowed: canRetryErasure,
    refusal: 'Only a failed erasure request can be retried',
    to: 'pending',
    action: 'erasure.retried',
  });
}
