import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';
import { id, nullableId, nullableString, nullableTimestamp, timestamp } from '../../http/responses';

// The title is a name (one line): it is mailed to outside addresses when the report is shared.
export const requestReportBody = Joi.object({
  title: name(),
});

export const listReportsQuery = Joi.object({
  ...paginationQuery,
  assessment_id: Joi.string().min(1).max(200),
  status: Joi.string().valid('pending', 'ready', 'failed'),
});

export const reportResponse = Joi.object({
  id: id('rpt'),
  assessment_id: id('asm'),
  project_id: id('prj'),
  title: Joi.string(),
  status: Joi.string().valid('pending', 'ready', 'failed'),
  size_bytes: Joi.number().integer().min(0).allow(null),
  error: nullableString(),
  requested_by_user_id: nullableId('usr'),
  created_at: timestamp(),
  ready_at: nullableTimestamp(),
});
