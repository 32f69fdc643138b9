import Joi from 'joi';
import { email, isoTimestamp, paginationQuery } from '../../http/validate';
import { id, nullableId, nullableString, nullableTimestamp, timestamp } from '../../http/responses';
import { sensitiveChangePassword } from '../auth/auth.schemas';

/** The published link never expires unless asked; `null` says so explicitly. */
export const publishReportBody = Joi.object({
  expires_at: isoTimestamp().allow(null),
  current_password: sensitiveChangePassword(),
});

/** A grant's lifetime defaults to REPORT_SHARE_DEFAULT_TTL_DAYS. */
export const shareReportBody = Joi.object({
  email: email().required(),
  expires_at: isoTimestamp(),
  current_password: sensitiveChangePassword(),
});

export const listSharesQuery = Joi.object({
  ...paginationQuery,
  status: Joi.string().valid('active', 'expired', 'revoked'),
});

export const shareResponse = Joi.object({
  id: id('rsh'),
  report_id: id('rpt'),
  kind: Joi.string().valid('link', 'email'),
  email: nullableString(),
  status: Joi.string().valid('active', 'expired', 'revoked'),
  expires_at: nullableTimestamp(),
  created_by_user_id: id('usr'),
  created_at: timestamp(),
  revoked_at: nullableTimestamp(),
  revoked_by_user_id: nullableId('usr'),
  last_accessed_at: nullableTimestamp(),
  access_count: Joi.number().integer().min(0),
});

/** The publish response: the only time the link (its token) is shown. */
export const publishedResponse = shareResponse.keys({ url: Joi.string().uri() });

/** What a share's holder sees: the report's public facts and where to download it, nothing of the organization's data. */
export const sharedReportResponse = Joi.object({
  title: Joi.string(),
  organization_name: Joi.string(),
  project_name: Joi.string(),
  assessment_name: Joi.string(),
  size_bytes: Joi.number().integer().min(0),
  ready_at: timestamp(),
  expires_at: nullableTimestamp(),
  download_path: Joi.string(),
});
