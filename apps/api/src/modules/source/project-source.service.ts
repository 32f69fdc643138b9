// What a project is assessed from: a repository (an HTTPS clone URL on a public host, checked with the webhook
// URL-safety rule, and its default branch) or one of the project's uploaded source archives. Shown on the project.
import { describeTargetRejection, resolveWebhookTarget } from '@svc/net';
import { scopedTo, type ProjectSource, type SourceArchive } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { unprocessable } from '../../http/errors';
import { requireProjectAccess, requireStillMayAccess } from '../access/access.service';
import { RECHECKED_TRANSACTION } from '../access/own-role';
import { recordAs, type RequestMeta } from '../audit/audit.context';

export type ProjectSourceInput =
  | { type: 'repository'; url: string; default_branch: string }
  | { type: 'archive'; archive_id: string };

export type ProjectSourceRow = ProjectSource & { archive: SourceArchive | null };
type SourceRow = ProjectSourceRow;

export function presentProjectSource(source: SourceRow | null) {
  if (!source) return null;
  return {
    type: source.kind as 'repository' | 'archive',
    repository_url: source.repositoryUrl,
    default_branch: source.defaultBranch,
    archive: source.archive
      ? { id: source.archive.id, assessment_id: source.archive.assessmentId, sha256: source.archive.sha256 }
      : null,
    updated_at: source.updatedAt.toISOString(),
  };
}

/** Clone URLs travel to a worker that fetches them: same rule as webhook URLs (https, public host, no credentials). */
async function checkedRepositoryUrl(deps: AppDeps, url: string): Promise<string> {
  const check = await resolveWebhookTarget(url, { allowedHosts: deps.config.webhooks.allowedHosts, dns: deps.config.webhooks.dns });
  if (!check.ok) throw unprocessable(`Repository URL refused: ${describeTargetRejection(check.reason)}.`);
  const parsed = check.target.url;
  if (parsed.search || parsed.hash) throw unprocessable('Repository URL refused: a clone URL has no query or fragment.');
  if (parsed.pathname.replace(/\/+$/, '').split('/').filter(Boolean).length < 1) {
    throw unprocessable('Repository URL refused: it names no repository path.');
  }
  return parsed.toString();
}

export async function getProjectSource(deps: AppDeps, principal: Principal, projectId: string) {
  const project = await requireProjectAccess(deps, principal, projectId, 'read');
  return presentProjectSource(await loadSource(deps, principal, project.id));
}

function loadSource(deps: AppDeps, principal: Principal, projectId: string): Promise<SourceRow | null> {
  return scopedTo(deps.prisma, principal).projectSource.findFirst({ where: { projectId }, include: { archive: true } });
}

export async function setProjectSource(deps: AppDeps, principal: Principal, meta: RequestMeta, projectId: string, input: ProjectSourceInput) {
  const project = await requireProjectAccess(deps, principal, projectId, 'write');
  const db = scopedTo(deps.prisma, principal);
  let data: { kind: string; repositoryUrl: string | null; defaultBranch: string | null; archiveId: string | null };
  if (input.type === 'repository') {
    data = { kind: 'repository', repositoryUrl: await checkedRepositoryUrl(deps, input.url), defaultBranch: input.default_branch, archiveId: null };
  } else {
    const archive = await db.sourceArchive.findFirst({ where: { id: input.archive_id, projectId: project.id } });
    if (!archive) throw unprocessable(`archive_id ${input.archive_id} is not a source archive of this project.`);
    data = { kind: 'archive', repositoryUrl: null, defaultBranch: null, archiveId: archive.id };
  }
  await db.$transaction(async (tx) => {
    await requireStillMayAccess(tx, principal, { kind: 'project', id: project.id }, { scope: 'projects:manage_source', action: "Changing a project's source", need: 'write', hold: true });
    await tx.projectSource.upsert({
      where: { projectId: project.id },
      create: { projectId: project.id, organizationId: principal.organizationId, ...data },
      update: data,
    });
    await recordAs(tx, principal, meta, deps.clock.now(), {
      action: 'project.source_changed',
      target: { type: 'project', id: project.id },
      // The clone URL carries no credentials (refused above); the archive by its id.
      metadata: { type: data.kind, repository_url: data.repositoryUrl, default_branch: data.defaultBranch, archive_id: data.archiveId },
    });
  }, RECHECKED_TRANSACTION);
  return presentProjectSource(await loadSource(deps, principal, project.id));
}

export async function removeProjectSource(deps: AppDeps, principal: Principal, meta: RequestMeta, projectId: string): Promise<void> {
  const project = await requireProjectAccess(deps, principal, projectId, 'write');
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillMayAccess(tx, principal, { kind: 'project', id: project.id }, { scope: 'projects:manage_source', action: "Removing a project's source", need: 'write', hold: true });
    const { count } = await tx.projectSource.deleteMany({ where: { projectId: project.id } });
    if (count > 0) {
      await recordAs(tx, principal, meta, deps.clock.now(), { action: 'project.source_removed', target: { type: 'project', id: project.id } });
    }
  }, RECHECKED_TRANSACTION);
}
