// Shapes of the webhook management requests. Values that are well-formed but refused (unknown event types,
// filter values outside their lists, unsafe URLs) are checked by the service and answer 422.
import Joi from 'joi';
import { name, paginationQuery } from '../../http/validate';

const stringList = (max: number) => Joi.array().items(Joi.string().max(100)).max(max).unique();

const subscriptionFields = {
  name: name(),
  url: Joi.string().trim().max(2048),
  events: stringList(50).min(1),
  active: Joi.boolean(),
  severity_filter: stringList(20).allow(null),
  status_filter: stringList(20).allow(null),
  payload_format: Joi.string().max(50),
  // Splunk HEC index, sent as the event's `index` (payload_format splunk_hec).
  splunk_index: Joi.string().pattern(/^[A-Za-z0-9_][A-Za-z0-9_-]{0,79}$/).allow(null),
  // Value of the Authorization header sent with every delivery (e.g. "Splunk <HEC token>"). Write-only.
  authorization: Joi.string().max(4096).pattern(/^[\x21-\x7e][\x20-\x7e]*$/).allow(null),
};

export const createSubscriptionBody = Joi.object({
  ...subscriptionFields,
  name: subscriptionFields.name.required(),
  url: subscriptionFields.url.required(),
  events: subscriptionFields.events.required(),
});

export const updateSubscriptionBody = Joi.object(subscriptionFields).min(1);

export const subscriptionParams = Joi.object({
  projectId: Joi.string().max(100),
  assessmentId: Joi.string().max(100),
  id: Joi.string().max(100).required(),
});

export const levelParams = Joi.object({
  projectId: Joi.string().max(100),
  assessmentId: Joi.string().max(100),
});

export const listQuery = Joi.object(paginationQuery);

export const deliveriesQuery = Joi.object({
  ...paginationQuery,
  subscription_id: Joi.string().max(100),
  event_type: Joi.string().max(100),
  status: Joi.string().valid('pending', 'succeeded', 'failed'),
  since: Joi.date().iso(),
  until: Joi.date().iso(),
});
