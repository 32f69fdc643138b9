import Joi from 'joi';
import { id, nullableString, timestamp } from '../../http/responses';

const repositorySource = Joi.object({
  type: Joi.string().valid('repository').required(),
  url: Joi.string().trim().max(2048).required().description('HTTPS clone URL on a public host'),
  // A git ref name, roughly git check-ref-format: no spaces, no '..', no leading or trailing slash.
  default_branch: Joi.string()
    .trim()
    .max(255)
    .pattern(/^(?!.*\.\.)(?!\/)(?!.*\/$)[A-Za-z0-9._\/-]+$/, 'branch name')
    .default('main'),
});

const archiveSource = Joi.object({
  type: Joi.string().valid('archive').required(),
  archive_id: id('src').required().description('A source archive uploaded to one of the project\'s assessments'),
});

export const projectSourceBody = Joi.alternatives().try(repositorySource, archiveSource);

export const projectSourceResponse = Joi.object({
  type: Joi.string().valid('repository', 'archive'),
  repository_url: nullableString(),
  default_branch: nullableString(),
  archive: Joi.object({ id: id('src'), assessment_id: id('asm'), sha256: Joi.string().hex().length(64) }).allow(null),
  updated_at: timestamp(),
})
  .allow(null)
  .description("The project's source: a repository or an uploaded archive; null when none is attached");

export const sourceArchiveResponse = Joi.object({
  id: id('src'),
  assessment_id: id('asm'),
  project_id: id('prj'),
  sha256: Joi.string().hex().length(64).description('SHA-256 of the archive as uploaded'),
  size_bytes: Joi.number().integer(),
  file_count: Joi.number().integer(),
  uncompressed_bytes: Joi.number().integer(),
  duplicate: Joi.boolean().description('True when these very bytes were already the assessment\'s archive: nothing was stored again'),
  created_at: timestamp(),
});

export const sourceFileResponse = Joi.object({
  path: Joi.string(),
  size_bytes: Joi.number().integer(),
  sha256: Joi.string().hex().length(64),
});

export const listSourceFilesQuery = Joi.object({
  limit: Joi.number().integer().min(1).max(100).default(25),
  cursor: Joi.string().max(8192).pattern(/^[A-Za-z0-9_-]+$/, 'cursor'),
  prefix: Joi.string().max(4096).description('Only paths starting with this text (a folder: "src/")'),
});

export const sourceFileQuery = Joi.object({
  path: Joi.string().min(1).max(4096).required().description('Path of the file in the archive, as listed'),
});

export const sourceUsageResponse = Joi.object({
  used_bytes: Joi.number().integer().description("Uncompressed bytes of all the organization's stored source archives"),
  quota_bytes: Joi.number().integer().description('SOURCE_ORG_QUOTA_BYTES: an upload that would go past it is refused (422)'),
});
