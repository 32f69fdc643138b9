// Shapes of the issue export requests. GitHub targets name owner/repo and a token (base_url only for GitHub
// Enterprise Server); Jira targets a site URL, project key, issue type, and an account e-mail with its API token.
// Credentials are write-only. A URL that fails the public-address rule answers 422 from the service.
import Joi from 'joi';
import { ISSUE_TRACKER_KINDS } from '@svc/webhooks';
import { email, name, paginationQuery } from '../../http/validate';
import { id, nullableString, nullableTimestamp, timestamp } from '../../http/responses';
import { sensitiveChangePassword } from '../auth/auth.schemas';

const secret = () => Joi.string().max(4096).pattern(/^[\x21-\x7e]+$/);
const fields = {
  name: name(),
  base_url: Joi.string().trim().max(2048),
  repository: Joi.string().pattern(/^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/),
  token: secret(),
  project_key: Joi.string().pattern(/^[A-Z][A-Z0-9_]{0,49}$/),
  issue_type: Joi.string().trim().min(1).max(100),
  email: email(),
  api_token: secret(),
};

export const createIssueTargetBody = Joi.object({
  ...fields,
  kind: Joi.string().valid(...ISSUE_TRACKER_KINDS).required(),
  name: fields.name.required(),
  base_url: fields.base_url.when('kind', { is: 'jira', then: Joi.required() }),
  repository: fields.repository.when('kind', { is: 'github', then: Joi.required(), otherwise: Joi.forbidden() }),
  token: fields.token.when('kind', { is: 'github', then: Joi.required(), otherwise: Joi.forbidden() }),
  project_key: fields.project_key.when('kind', { is: 'jira', then: Joi.required(), otherwise: Joi.forbidden() }),
  issue_type: fields.issue_type.when('kind', { is: 'jira', otherwise: Joi.forbidden() }),
  email: fields.email.when('kind', { is: 'jira', then: Joi.required(), otherwise: Joi.forbidden() }),
  api_token: fields.api_token.when('kind', { is: 'jira', then: Joi.required(), otherwise: Joi.forbidden() }),
  current_password: sensitiveChangePassword(),
});

// The kind never changes; the service refuses the other tracker's fields. Jira's e-mail and API token go together.
// At least one field of the target (the password alone changes nothing); the password when the destination changes.
export const updateIssueTargetBody = Joi.object({ ...fields, current_password: sensitiveChangePassword() })
  .or(...Object.keys(fields))
  .and('email', 'api_token');

export const issueTargetParams = Joi.object({ id: Joi.string().max(100).required() });
export const listQuery = Joi.object(paginationQuery);

export const issueTargetResponse = Joi.object({
  id: id('iexp'),
  name: Joi.string(),
  kind: Joi.string().valid(...ISSUE_TRACKER_KINDS),
  base_url: Joi.string(),
  repository: nullableString(),
  project_key: nullableString(),
  issue_type: nullableString(),
  has_credentials: Joi.boolean(),
  last_success_at: nullableTimestamp(),
  last_error: nullableString(),
  last_error_at: nullableTimestamp(),
  created_at: timestamp(),
  updated_at: timestamp(),
});

export const exportFindingBody = Joi.object({ target_id: Joi.string().max(100).required() });
export const findingParams = Joi.object({ id: Joi.string().max(100).required() });

export const issueExportResponse = Joi.object({
  id: id('iexj'),
  finding_id: id('fnd'),
  target_id: id('iexp'),
  target_name: nullableString(),
  kind: Joi.string().valid(...ISSUE_TRACKER_KINDS).allow(null),
  status: Joi.string().valid('pending', 'succeeded', 'failed'),
  attempt_count: Joi.number().integer().min(0),
  external_key: nullableString(),
  external_url: nullableString(),
  last_error: nullableString(),
  next_attempt_at: nullableTimestamp(),
  completed_at: nullableTimestamp(),
  created_at: timestamp(),
  updated_at: timestamp(),
});
