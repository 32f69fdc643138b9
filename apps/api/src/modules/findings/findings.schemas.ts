import Joi from 'joi';
import { FINDING_STATUSES, SEVERITIES } from '@svc/domain';
import { paginationQuery } from '../../http/validate';
import { id, nullableId, nullableString, nullableTimestamp, timestamp } from '../../http/responses';

// Severity and status values are checked by the service: a well-formed value outside its list is 422.
export const recordFindingBody = Joi.object({
  title: Joi.string().trim().min(1).max(500).required(),
  severity: Joi.string().min(1).max(50).required(),
  fingerprint: Joi.string().trim().min(1).max(256).required(),
  location: Joi.string().trim().max(2000).allow('', null),
  description: Joi.string().max(20000).allow('', null),
});

export const severityBody = Joi.object({ severity: Joi.string().min(1).max(50).required() });

export const reassignBody = Joi.object({ assignee_user_id: Joi.string().min(1).max(200).allow(null).required() });

/** Filters shared by the list and the export; severity and status take one value or a comma-separated list. */
const filters = {
  project_id: Joi.string().min(1).max(200),
  assessment_id: Joi.string().min(1).max(200),
  severity: Joi.string().min(1).max(200),
  status: Joi.string().min(1).max(200),
  assignee: Joi.string().min(1).max(200),
};

export const listFindingsQuery = Joi.object({ ...paginationQuery, ...filters });

export const exportFindingsQuery = Joi.object({ format: Joi.string().valid('sarif', 'json', 'csv').required(), ...filters });

export const findingResponse = Joi.object({
  id: id('fnd'),
  project_id: id('prj'),
  assessment_id: id('asm'),
  fingerprint: Joi.string().description('Stable identity of the issue within its assessment'),
  title: Joi.string(),
  severity: Joi.string().valid(...SEVERITIES),
  original_severity: Joi.string().valid(...SEVERITIES).description('As the engine reported it; severity may be overridden'),
  status: Joi.string().valid(...FINDING_STATUSES),
  location: nullableString(),
  description: nullableString(),
  assignee_user_id: nullableId('usr'),
  opened_at: timestamp().description('When it (re)entered an open status; the SLA window counts from here'),
  sla_due_at: nullableTimestamp().description('End of its SLA window; null when closed or no SLA for its severity'),
  sla_breached_at: nullableTimestamp().description('When finding.sla_breached was published for the current breach'),
  fixed_at: nullableTimestamp(),
  created_at: timestamp(),
  updated_at: timestamp(),
});
