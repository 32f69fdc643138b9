// Shapes of the notification target requests. Well-formed but refused values (unknown event types, severities
// outside their list, an unsafe URL) answer 422 from the service, as for webhooks.
import Joi from 'joi';
import { NOTIFICATION_KINDS } from '@svc/webhooks';
import { email, name, paginationQuery } from '../../http/validate';
import { id, list, nullableString, nullableTimestamp, timestamp } from '../../http/responses';
import { sensitiveChangePassword } from '../auth/auth.schemas';

const stringList = (max: number) => Joi.array().items(Joi.string().max(100)).max(max).unique();
export const MAX_RECIPIENTS = 20;

const targetFields = {
  name: name(),
  // Slack incoming webhook URL or Teams Workflows webhook URL: a credential, so write-only.
  url: Joi.string().trim().max(2048),
  // E-mail targets: where the messages go.
  recipients: Joi.array().items(email()).min(1).max(MAX_RECIPIENTS).unique(),
  events: stringList(50).min(1),
  severity_filter: stringList(20).allow(null),
  active: Joi.boolean(),
};

export const createTargetBody = Joi.object({
  ...targetFields,
  kind: Joi.string().valid(...NOTIFICATION_KINDS).required(),
  name: targetFields.name.required(),
  events: targetFields.events.required(),
  url: targetFields.url.when('kind', { is: 'email', then: Joi.forbidden(), otherwise: Joi.required() }),
  recipients: targetFields.recipients.when('kind', { is: 'email', then: Joi.required(), otherwise: Joi.forbidden() }),
  current_password: sensitiveChangePassword(),
});

// The kind never changes; the service refuses a url for an e-mail target and recipients for a chat one. At least one
// field of the target (the password alone changes nothing); the password when the destination changes.
export const updateTargetBody = Joi.object({ ...targetFields, current_password: sensitiveChangePassword() }).or(...Object.keys(targetFields));

export const targetParams = Joi.object({ id: Joi.string().max(100).required() });
export const listQuery = Joi.object(paginationQuery);

export const targetResponse = Joi.object({
  id: id('ntgt'),
  name: Joi.string(),
  kind: Joi.string().valid(...NOTIFICATION_KINDS),
  url_host: nullableString(),
  recipients: Joi.array().items(Joi.string()),
  events: Joi.array().items(Joi.string()),
  severity_filter: Joi.array().items(Joi.string()).allow(null),
  active: Joi.boolean(),
  status: Joi.string().valid('active', 'failing', 'disabled'),
  disabled_reason: nullableString(),
  last_sent_at: nullableTimestamp(),
  last_error: nullableString(),
  last_error_at: nullableTimestamp(),
  created_at: timestamp(),
  updated_at: timestamp(),
});

export const testMessageResponse = Joi.object({ event_id: id('event'), delivery_id: id('whdel') });

export const eventTypesResponse = list(Joi.object({ type: Joi.string(), description: Joi.string() }));
