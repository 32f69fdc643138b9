// Source archives of assessments: upload (spooled, judged, extracted into the storage), metadata, the list of
// extracted files, one file's content and the original archive. One archive per assessment: a different upload
// replaces it, the same bytes again answer the stored one.
import { createReadStream } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { newId, organizationOf, scopedTo, type ScopedDb, type SourceArchive } from '@svc/db';
import { ArchiveRefusal, refuseOverQuota } from '@svc/domain';
import { ObjectNotFoundError } from '@svc/storage';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { HttpError, badRequest, conflict, notFound, unprocessable } from '../../http/errors';
import type { Page } from '../../http/pagination';
import { requireAssessmentAccess, requireStillMayAccess } from '../access/access.service';
import { RECHECKED_TRANSACTION } from '../access/own-role';
import { inTurnOf, type InTurn } from '../../http/organization-turns';
import { recordAs, requestMeta, type RequestMeta } from '../audit/audit.context';
import type { AssessmentState } from '../assessments/assessment-lifecycle';
import { extractArchive, type ExtractedFile } from './archive-extraction';
import { archiveKeyOf, fileKeyOf, uploadPrefixOf } from './stored-objects';
import { closeAfterAnswer, spoolUpload } from './upload-spool';
import { EXTRACT_PREFIX, makeTempFolder } from './temp-files';

/** Source can be handed over until the engine starts: while the assessment is a draft or launched (queued). */
export const ACCEPTS_SOURCE: readonly AssessmentState[] = ['draft', 'queued'];

export const SHA256_HEADER = 'X-Service-Source-Sha256';

export function presentArchive(a: SourceArchive, duplicate = false) {
  return {
    id: a.id,
    assessment_id: a.assessmentId,
    project_id: a.projectId,
    sha256: a.sha256,
    size_bytes: Number(a.sizeBytes),
    file_count: a.fileCount,
    uncompressed_bytes: Number(a.uncompressedBytes),
    duplicate,
    created_at: a.createdAt.toISOString(),
  };
}

function requireZipBody(req: Request): void {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/zip' && type !== 'application/x-zip-compressed') {
    throw new HttpError(415, 'Send the archive as the request body with Content-Type: application/zip.');
  }
}

export async function uploadSourceArchive(deps: AppDeps, principal: Principal, assessmentId: string, req: Request, res: Response) {
  try {
    requireZipBody(req);
    const assessment = await requireAssessmentAccess(deps, principal, assessmentId, 'write');
    requireAcceptsSource(assessment.status);
    const upload = await spoolUpload(req, deps.config.source.maxUploadBytes, deps.config.source);
    try {
      const db = scopedTo(deps.prisma, principal);
      const same = await db.sourceArchive.findFirst({ where: { assessmentId: assessment.id, sha256: upload.sha256 } });
      if (same) return presentArchive(same, true);
      return await storeArchive(deps, principal, requestMeta(req), assessment, upload, inTurnOf(req));
    } finally {
      await upload.discard();
    }
  } catch (err) {
    closeAfterAnswer(req, res);
    if (err instanceof ArchiveRefusal) throw unprocessable(err.message);
    throw err;
  }
}

function requireAcceptsSource(status: string): void {
  if (!ACCEPTS_SOURCE.includes(status as AssessmentState)) {
    throw conflict(`Cannot upload source to an assessment that is ${status} (allowed while: ${ACCEPTS_SOURCE.join(', ')}).`);
  }
}

async function storeArchive(
  deps: AppDeps,
  principal: Principal,
  meta: RequestMeta,
  assessment: { id: string; organizationId: string; projectId: string },
  upload: { file: string; size: number; sha256: string },
  inTurn: InTurn,
) {
  const archiveId = newId('src');
  const owner = { organizationId: assessment.organizationId, projectId: assessment.projectId, assessmentId: assessment.id };
  const prefix = uploadPrefixOf(owner, archiveId);
  const scratch = await makeTempFolder(deps.config.source, EXTRACT_PREFIX);
  let previous: SourceArchive | null = null;
  let created: SourceArchive;
  // Before a byte is stored: the quota as it stands (checked again, under a lock, where the row is written).
  const admit = async (incomingBytes: number) =>
    refuseOverQuota({ ...(await quotaStanding(scopedTo(deps.prisma, principal), assessment.id)), incomingBytes, quotaBytes: deps.config.source.orgQuotaBytes });
  try {
    const files = await extractArchive(upload.file, upload.size, deps.config.source, admit, deps.storage, prefix, path.join(scratch.dir, 'entry'));
    await deps.storage.put(archiveKeyOf(prefix), createReadStream(upload.file), upload.size);
    // The record waits for the rows a deletion holds, keeping a connection: in one of the organization's turns
    // (http/organization-turns.ts), which the streamed body did not take.
    ({ previous, created } = await inTurn(() => recordArchive(deps, principal, meta, assessment, archiveId, prefix, upload, files)));
  } catch (err) {
    // The refusal is the answer; objects a failed delete leaves have no row, and the orphan sweep takes them.
    await deps.storage.deletePrefix(prefix).catch((deleteErr: Error) =>
      deps.logger.warn('could not delete a refused upload\'s objects; the orphan sweep will', { prefix, error: deleteErr.message }),
    );
    throw err;
  } finally {
    await scratch.remove();
  }
  if (previous) {
    // No row references these objects any more: the worker's orphan sweep removes whatever this leaves behind.
    await deps.storage.deletePrefix(previous.storagePrefix).catch((err: Error) =>
      deps.logger.warn('could not delete a replaced source archive; the orphan sweep will', { archive_id: previous!.id, error: err.message }),
    );
  }
  return presentArchive(created);
}

async function recordArchive(
  deps: AppDeps,
  principal: Principal,
  meta: RequestMeta,
  assessment: { id: string; projectId: string },
  archiveId: string,
  prefix: string,
  upload: { size: number; sha256: string },
  files: ExtractedFile[],
) {
  return scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // Uploads of one organization are serialised here, so two at once cannot both fit under the quota. FOR NO KEY
    // UPDATE, as every lock of the organization's row (own-role.ts): the organization's inserts do not wait for it.
    // First, as own-role.ts orders them: the organization's row, then the uploader's membership.
    await tx.$queryRaw`SELECT id FROM organizations WHERE id = ${organizationOf(tx)} FOR NO KEY UPDATE`;
    // Demoted, or their grant taken away, while the upload streamed: nothing is recorded, its objects are deleted.
    await requireStillMayAccess(tx, principal, { kind: 'assessment', id: assessment.id }, { scope: 'source:upload_zip', action: 'Uploading source', need: 'write', hold: true });
    // The state is checked again where it counts: the engine may have started while the upload streamed.
    const fresh = await tx.assessment.findFirst({ where: { id: assessment.id }, select: { status: true } });
    if (!fresh) throw notFound('Assessment');
    requireAcceptsSource(fresh.status);
    const incomingBytes = files.reduce((sum, f) => sum + f.size, 0);
    refuseOverQuota({ ...(await quotaStanding(tx, assessment.id)), incomingBytes, quotaBytes: deps.config.source.orgQuotaBytes });
    const previous = await tx.sourceArchive.findFirst({ where: { assessmentId: assessment.id } });
    if (previous) {
      // Projects whose source was that archive lose it with the row (a cascade): said in the audit log.
      const orphanedSources = await tx.projectSource.findMany({ where: { archiveId: previous.id }, select: { projectId: true } });
      await tx.sourceArchive.deleteMany({ where: { id: previous.id } });
      for (const source of orphanedSources) {
        await recordAs(tx, principal, meta, deps.clock.now(), {
          action: 'project.source_removed',
          target: { type: 'project', id: source.projectId },
          metadata: { reason: 'archive_replaced', archive_id: previous.id, replaced_by: archiveId },
        });
      }
    }
    const created = await tx.sourceArchive.create({
      data: {
        id: archiveId,
        organizationId: principal.organizationId,
        projectId: assessment.projectId,
        assessmentId: assessment.id,
        sha256: upload.sha256,
        sizeBytes: BigInt(upload.size),
        fileCount: files.length,
        uncompressedBytes: BigInt(incomingBytes),
        storagePrefix: prefix,
        createdById: principal.userId,
      },
    });
    await tx.sourceFile.createMany({
      data: files.map((f) => ({
        archiveId,
        organizationId: principal.organizationId,
        path: f.path,
        sizeBytes: BigInt(f.size),
        sha256: f.sha256,
      })),
    });
    await recordAs(tx, principal, meta, deps.clock.now(), {
      action: 'source.uploaded',
      target: { type: 'assessment', id: assessment.id },
      metadata: { archive_id: archiveId, sha256: upload.sha256, size_bytes: upload.size, file_count: files.length, replaced: previous?.id ?? null },
    });
    return { previous, created };
  }, RECHECKED_TRANSACTION);
}

/** What the organization's archives hold, and what the assessment's current archive (replaced by an upload) holds. */
async function quotaStanding(db: Pick<ScopedDb, 'sourceArchive'>, assessmentId: string): Promise<{ usedBytes: number; replacedBytes: number }> {
  const [usedBytes, replaced] = await Promise.all([
    usedSourceBytes(db),
    db.sourceArchive.findFirst({ where: { assessmentId }, select: { uncompressedBytes: true } }),
  ]);
  return { usedBytes, replacedBytes: Number(replaced?.uncompressedBytes ?? 0n) };
}

async function usedSourceBytes(db: Pick<ScopedDb, 'sourceArchive'>): Promise<number> {
  const used = await db.sourceArchive.aggregate({ _sum: { uncompressedBytes: true } });
  return Number(used._sum.uncompressedBytes ?? 0n);
}

/** The organization's stored uncompressed source bytes and its quota (the dashboard's source page shows both). */
export async function getSourceUsage(deps: AppDeps, principal: Principal) {
  return { used_bytes: await usedSourceBytes(scopedTo(deps.prisma, principal)), quota_bytes: deps.config.source.orgQuotaBytes };
}

async function requireArchive(deps: AppDeps, principal: Principal, assessmentId: string): Promise<SourceArchive> {
  const assessment = await requireAssessmentAccess(deps, principal, assessmentId, 'read');
  const archive = await scopedTo(deps.prisma, principal).sourceArchive.findFirst({ where: { assessmentId: assessment.id } });
  if (!archive) throw notFound('Source archive');
  return archive;
}

export async function getSourceArchive(deps: AppDeps, principal: Principal, assessmentId: string) {
  return presentArchive(await requireArchive(deps, principal, assessmentId));
}

// File lists page by path (alphabetical, the order of a file browser); the cursor is the last path, encoded.
const encodeCursor = (p: string) => Buffer.from(p, 'utf8').toString('base64url');
/** The path a cursor names, or 400 for one this service did not make (PostgreSQL refuses a NUL in text: 500). */
function decodeCursor(cursor: string): string {
  const path = Buffer.from(cursor, 'base64url').toString('utf8');
  if (path.includes('\u0000') || encodeCursor(path) !== cursor) throw badRequest('Invalid cursor: pass next_cursor as answered.');
  return path;
}

export async function listSourceFiles(
  deps: AppDeps,
  principal: Principal,
  assessmentId: string,
  query: { limit: number; cursor?: string; prefix?: string },
): Promise<Page<{ path: string; size_bytes: number; sha256: string }>> {
  const archive = await requireArchive(deps, principal, assessmentId);
  const rows = await scopedTo(deps.prisma, principal).sourceFile.findMany({
    where: {
      archiveId: archive.id,
      ...(query.prefix || query.cursor
        ? {
            path: {
              ...(query.prefix ? { startsWith: query.prefix } : {}),
              ...(query.cursor ? { gt: decodeCursor(query.cursor) } : {}),
            },
          }
        : {}),
    },
    orderBy: { path: 'asc' },
    take: query.limit + 1,
  });
  const hasMore = rows.length > query.limit;
  const pageRows = hasMore ? rows.slice(0, query.limit) : rows;
  return {
    data: pageRows.map((f) => ({ path: f.path, size_bytes: Number(f.sizeBytes), sha256: f.sha256 })),
    next_cursor: hasMore ? encodeCursor(pageRows[pageRows.length - 1]!.path) : null,
  };
}

/** Text if the first bytes hold no NUL and decode as UTF-8. */
function looksLikeText(head: Buffer): boolean {
  if (head.includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head);
    return true;
  } catch {
    return false;
  }
}

async function readHead(stream: NodeJS.ReadableStream, bytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    length += chunk.length;
    if (length >= bytes) break;
  }
  return Buffer.concat(chunks).subarray(0, bytes);
}

/**
 * One extracted file: text (UTF-8, up to SOURCE_TEXT_MAX_BYTES) inline as text/plain; binary or larger files as
 * an attachment download. A path that is not in the archive is 404.
 */
export async function sendSourceFile(deps: AppDeps, principal: Principal, assessmentId: string, filePath: string, res: Response) {
  const archive = await requireArchive(deps, principal, assessmentId);
  const file = await scopedTo(deps.prisma, principal).sourceFile.findFirst({ where: { archiveId: archive.id, path: filePath } });
  if (!file) throw notFound('File');
  const key = fileKeyOf(archive.storagePrefix, file.sha256);
  const size = Number(file.sizeBytes);
  const asText = size <= deps.config.source.textMaxBytes && looksLikeText(await readHead(await openStored(deps, key), size));
  res.setHeader(SHA256_HEADER, file.sha256);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Content-Length', String(size));
  if (asText) {
    res.type('text/plain; charset=utf-8');
  } else {
    // attachment() would pick a type from the extension: a download is bytes, whatever its name says.
    res.attachment(path.posix.basename(file.path));
    res.type('application/octet-stream');
  }
  await pipeline(await openStored(deps, key), res);
}

export async function sendSourceArchive(deps: AppDeps, principal: Principal, meta: RequestMeta, assessmentId: string, res: Response) {
  const archive = await requireArchive(deps, principal, assessmentId);
  const body = await openStored(deps, archiveKeyOf(archive.storagePrefix));
  // The whole source leaving the service is worth a line in the audit log.
  await recordAs(scopedTo(deps.prisma, principal), principal, meta, deps.clock.now(), {
    action: 'source.archive_downloaded',
    target: { type: 'assessment', id: archive.assessmentId },
    metadata: { archive_id: archive.id, sha256: archive.sha256 },
  });
  res.type('application/zip');
  res.attachment(`${archive.assessmentId}-source.zip`);
  res.setHeader('Content-Length', String(archive.sizeBytes));
  res.setHeader(SHA256_HEADER, archive.sha256);
  res.setHeader('Repr-Digest', `sha-256=:${Buffer.from(archive.sha256, 'hex').toString('base64')}:`);
  await pipeline(body, res);
}

async function openStored(deps: AppDeps, key: string) {
  try {
    return await deps.storage.get(key);
  } catch (err) {
    // A row whose object is missing is a storage fault, not the client's: logged, answered 404 like a gone file.
    if (err instanceof ObjectNotFoundError) {
      deps.logger.error('stored source object missing', { key });
      throw notFound('File');
    }
    throw err;
  }
}
