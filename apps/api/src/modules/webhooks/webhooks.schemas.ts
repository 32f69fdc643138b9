// Shapes of the webhook management requests. Values that are well-formed but refused (unknown event types,
// filter values outside their lists, unsafe URLs) are checked by the service and answer 422.
import Joi from 'joi';
import { isoTimestamp, name, paginationQuery } from '../../http/validate';
import { id, list, nullableId, nullableString, nullableTimestamp, timestamp } from '../../http/responses';
import { sensitiveChangePassword } from '../auth/auth.schemas';

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
  // Splunk HEC request channel (a GUID), sent as X-Splunk-Request-Channel (payload_format splunk_hec).
  splunk_channel: Joi.string().guid().allow(null),
  // Splunk HEC indexer acknowledgement (splunk_hec with a splunk_channel, else 422).
  hec_ack: Joi.boolean().description(
    'splunk_hec only, with splunk_channel set: a delivery succeeds only once Splunk reports its events indexed (POST /services/collector/ack); re-sent when the ack does not come in time (at-least-once).',
  ),
  // How deliveries are signed: service (X-Service-Signature only, the default) or standard_webhooks (webhook-id,
  // webhook-timestamp and webhook-signature as well). Other values answer 422.
  signature_scheme: Joi.string()
    .max(50)
    .description(
      'service (default): X-Service-Signature only. standard_webhooks: also webhook-id, webhook-timestamp and webhook-signature (Standard Webhooks; verify with the whsec_ secret as given).',
    ),
  // Receiver-set throttle: deliveries per second across every worker; null removes it.
  rate_limit: Joi.number().integer().min(1).max(1000).allow(null),
  // Microsoft Entra ID app credentials for microsoft_sentinel: given together, or all null to remove. Write-only.
  azure_tenant_id: Joi.string().max(100).pattern(/^[A-Za-z0-9.-]+$/).allow(null),
  azure_client_id: Joi.string().guid().allow(null),
  azure_client_secret: Joi.string().max(1024).pattern(/^[\x20-\x7e]+$/).allow(null),
};

const AZURE_CREDENTIAL_FIELDS = ['azure_tenant_id', 'azure_client_id', 'azure_client_secret'] as const;

export const createSubscriptionBody = Joi.object({
  ...subscriptionFields,
  name: subscriptionFields.name.required(),
  url: subscriptionFields.url.required(),
  events: subscriptionFields.events.required(),
  current_password: sensitiveChangePassword(),
}).and(...AZURE_CREDENTIAL_FIELDS);

// At least one field of the subscription (the password alone changes nothing); the password when the URL changes.
export const updateSubscriptionBody = Joi.object({ ...subscriptionFields, current_password: sensitiveChangePassword() })
  .or(...Object.keys(subscriptionFields))
  .and(...AZURE_CREDENTIAL_FIELDS);

/** Rotating the secret: no body, or the password from an older session (sudo mode). */
export const rotateSecretBody = Joi.object({ current_password: sensitiveChangePassword() });

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
  since: isoTimestamp(),
  until: isoTimestamp(),
});

const deliveryStatus = Joi.string().valid('pending', 'succeeded', 'failed');

export const eventTypesResponse = list(Joi.object({ type: Joi.string(), description: Joi.string() }));

export const subscriptionResponse = Joi.object({
  id: id('whsub'),
  name: Joi.string(),
  url: Joi.string().uri({ scheme: 'https' }),
  events: Joi.array().items(Joi.string()),
  active: Joi.boolean(),
  status: Joi.string().valid('active', 'failing', 'disabled'),
  severity_filter: Joi.array().items(Joi.string()).allow(null),
  status_filter: Joi.array().items(Joi.string()).allow(null),
  payload_format: Joi.string().valid('service', 'splunk_hec', 'microsoft_sentinel', 'cef'),
  splunk_index: nullableString(),
  has_authorization: Joi.boolean(),
  splunk_channel: nullableString(),
  hec_ack: Joi.boolean(),
  has_azure_credentials: Joi.boolean(),
  signature_scheme: Joi.string().valid('service', 'standard_webhooks').description('How deliveries are signed (docs/webhooks.md "Verifying a signature")'),
  level: Joi.string().valid('organization', 'project', 'assessment'),
  project_id: nullableId('prj'),
  assessment_id: nullableId('asm'),
  previous_secret_expires_at: nullableTimestamp(),
  disabled_reason: nullableString(),
  rate_limit: Joi.number().integer().min(1).allow(null),
  breaker: Joi.object({
    state: Joi.string().valid('closed', 'open', 'half_open'),
    until: nullableTimestamp(),
  }),
  created_at: timestamp(),
  updated_at: timestamp(),
});

export const createdSubscriptionResponse = subscriptionResponse.keys({ secret: Joi.string().pattern(/^whsec_/) });

export const rotatedSecretResponse = Joi.object({
  id: id('whsub'),
  secret: Joi.string().pattern(/^whsec_/),
  previous_secret_expires_at: timestamp(),
});

export const testDeliveryResponse = Joi.object({ event_id: id('event'), delivery_id: id('whdel') });

export const deliveryResponse = Joi.object({
  id: id('whdel'),
  subscription_id: id('whsub'),
  event_id: id('event'),
  event_type: Joi.string(),
  status: deliveryStatus,
  attempt_count: Joi.number().integer().min(0),
  next_attempt_at: nullableTimestamp(),
  wait_reason: Joi.string().valid('backoff', 'breaker_open', 'in_flight_cap', 'rate_limit', 'hec_ack').allow(null),
  completed_at: nullableTimestamp(),
  failure_reason: nullableString(),
  redelivery_of: nullableId('whdel'),
  created_at: timestamp(),
  payload: Joi.object({
    id: id('whdel'),
    event_id: id('event'),
    type: Joi.string(),
    created_at: timestamp(),
    organization_id: id('org'),
    data: Joi.object({ kind: Joi.string() }).unknown(true),
  }),
});

export const attemptsResponse = Joi.object({
  delivery_id: id('whdel'),
  data: Joi.array().items(
    Joi.object({
      number: Joi.number().integer().min(1),
      started_at: timestamp(),
      duration_ms: Joi.number().integer().min(0),
      outcome: Joi.string(),
      response_status: Joi.number().integer().allow(null),
      response_headers: Joi.object().pattern(Joi.string(), Joi.string()).allow(null),
      response_body: nullableString().allow(''),
      error: nullableString(),
      retry_after_ms: Joi.number().integer().min(0).allow(null),
    }),
  ),
});

const logAnalyticsColumn = Joi.object({
  name: Joi.string(),
  type: Joi.string().valid('datetime', 'string', 'long', 'real', 'boolean'),
});

export const sentinelSchemaResponse = Joi.object({
  subscription_id: id('whsub'),
  events: Joi.array().items(Joi.string()),
  columns: Joi.array().items(logAnalyticsColumn),
  stream_declarations: Joi.object().pattern(Joi.string(), Joi.object({ columns: Joi.array().items(logAnalyticsColumn) })),
  data_flows: Joi.array().items(
    Joi.object({
      streams: Joi.array().items(Joi.string()),
      destinations: Joi.array().items(Joi.string()),
      transformKql: Joi.string(),
      outputStream: Joi.string(),
    }),
  ),
});

export const recoverBody = Joi.object({
  since: isoTimestamp().required(),
  until: isoTimestamp(),
});

export const recoverResponse = Joi.object({
  subscription_id: id('whsub'),
  since: timestamp(),
  until: timestamp(),
  requeued: Joi.number().integer().min(0),
  more: Joi.boolean(),
});
