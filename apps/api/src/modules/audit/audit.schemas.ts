import Joi from 'joi';
import { AUDIT_ACTIONS, AUDIT_ACTOR_TYPES } from '@svc/audit';
import { id, nullableString, timestamp } from '../../http/responses';
import { isoTimestamp, paginationQuery } from '../../http/validate';
import { AUDIT_EXPORT_FORMATS } from './audit.service';

// `action` outside the catalogue is well-formed but refused by the service (422), like other list filters.
const filters = {
  action: Joi.string().max(100),
  actor_id: Joi.string().max(100),
  target_id: Joi.string().max(200),
  since: isoTimestamp(),
  until: isoTimestamp(),
};

export const listAuditEventsQuery = Joi.object({ ...paginationQuery, ...filters });

export const exportAuditEventsQuery = Joi.object({
  ...filters,
  format: Joi.string().valid(...AUDIT_EXPORT_FORMATS).default('jsonl'),
});

export const auditEventResponse = Joi.object({
  id: id('aud'),
  created_at: timestamp(),
  action: Joi.string().valid(...AUDIT_ACTIONS),
  actor_type: Joi.string().valid(...AUDIT_ACTOR_TYPES),
  actor_id: nullableString(),
  actor_label: nullableString(),
  target_type: nullableString(),
  target_id: nullableString(),
  ip: nullableString(),
  user_agent: nullableString(),
  metadata: Joi.object().unknown(true).allow(null),
});
