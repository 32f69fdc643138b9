import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import { requestMeta } from '../audit/audit.context';
import { page } from '../../http/responses';
import {
  projectSourceBody,
  projectSourceResponse,
  listSourceFilesQuery,
  sourceArchiveResponse,
  sourceFileQuery,
  sourceFileResponse,
  sourceUsageResponse,
} from './source.schemas';
import { removeProjectSource, setProjectSource } from './project-source.service';
import { getSourceArchive, getSourceUsage, listSourceFiles, sendSourceArchive, sendSourceFile, uploadSourceArchive } from './source.service';

export function sourceRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'put',
      path: '/projects/:id/source',
      scope: 'projects:manage_source',
      summary:
        'Attach or change the project\'s source: {type: "repository", url, default_branch} (an HTTPS clone URL on a public host) ' +
        'or {type: "archive", archive_id} (an archive uploaded to one of its assessments); write access required',
      schemas: { body: projectSourceBody },
      response: projectSourceResponse,
      handler: (req) => setProjectSource(deps, principalOf(req), requestMeta(req), idParam(req), req.body),
    },
    {
      method: 'delete',
      path: '/projects/:id/source',
      scope: 'projects:manage_source',
      summary: "Remove the project's source (write access required)",
      handler: (req) => removeProjectSource(deps, principalOf(req), requestMeta(req), idParam(req)),
    },
    {
      method: 'post',
      path: '/assessments/:id/source',
      scope: 'source:upload_zip',
      summary:
        'Upload the zipped source of a draft or queued assessment as the raw body (Content-Type: application/zip). ' +
        '413 past SOURCE_UPLOAD_MAX_BYTES, 422 naming an unsafe entry, for a zip bomb or past the organization\'s ' +
        'quota (SOURCE_ORG_QUOTA_BYTES), 409 in other states. ' +
        'A different archive replaces the previous one; the same bytes again answer the stored one (duplicate: true)',
      requestMediaType: 'application/zip',
      response: sourceArchiveResponse,
      handler: (req, res) => uploadSourceArchive(deps, principalOf(req), idParam(req), req, res),
    },
    {
      method: 'get',
      path: '/organization/source-usage',
      scope: 'source:read_artifacts',
      summary: "Uncompressed bytes of source the organization's archives hold, and its quota (SOURCE_ORG_QUOTA_BYTES)",
      response: sourceUsageResponse,
      handler: (req) => getSourceUsage(deps, principalOf(req)),
    },
    {
      method: 'get',
      path: '/assessments/:id/source',
      scope: 'source:read_artifacts',
      summary: "The assessment's source archive: SHA-256, sizes, file count (404 when none was uploaded)",
      response: sourceArchiveResponse,
      handler: (req) => getSourceArchive(deps, principalOf(req), idParam(req)),
    },
    {
      method: 'get',
      path: '/assessments/:id/source/files',
      scope: 'source:read_artifacts',
      summary: 'List the extracted files (path, size, SHA-256) in path order; optional ?prefix=',
      schemas: { query: listSourceFilesQuery },
      response: page(sourceFileResponse),
      handler: (req) => listSourceFiles(deps, principalOf(req), idParam(req), req.query as never),
    },
    {
      method: 'get',
      path: '/assessments/:id/source/file',
      scope: 'source:read_artifacts',
      summary:
        'One extracted file by ?path=: UTF-8 text up to SOURCE_TEXT_MAX_BYTES as text/plain, anything else as an ' +
        'application/octet-stream attachment; a path not in the archive is 404',
      schemas: { query: sourceFileQuery },
      responseMediaType: 'text/plain',
      handler: (req, res) => sendSourceFile(deps, principalOf(req), idParam(req), (req.query as { path: string }).path, res),
    },
    {
      method: 'get',
      path: '/assessments/:id/source/archive',
      scope: 'source:download_archive',
      summary: 'Download the original archive (streamed; X-Service-Source-Sha256 and Repr-Digest carry its SHA-256)',
      responseMediaType: 'application/zip',
      handler: (req, res) => sendSourceArchive(deps, principalOf(req), requestMeta(req), idParam(req), res),
    },
  ];
}
