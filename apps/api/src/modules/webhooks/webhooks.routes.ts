// The webhook management routes (SPEC's ten plus read, resend and recover), mounted once per level (org-wide, per project, per assessment)
// from one table: only the base path and the access rule differ between levels.
import type { Request } from 'express';
import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import type { RateLimiters } from '../../http/rate-limit';
import { acting } from '../audit/audit.context';
import { requestConfirmer, withoutCurrentPassword } from '../auth/reauthentication';
import { LEVELS, type LevelContext, type LevelDefinition } from './levels';
import { listAttempts, listDeliveries, readDelivery, recoverDeliveries, resendDelivery } from './deliveries.service';
import {
  createSubscription,
  deleteSubscription,
  findSubscription,
  listSubscriptions,
  presentSubscription,
  rotateSecret,
  sendTestEvent,
  subscriptionSentinelSchema,
  updateSubscription,
} from './subscriptions.service';
import { page } from '../../http/responses';
import {
  attemptsResponse,
  createdSubscriptionResponse,
  deliveryResponse,
  eventTypesResponse,
  rotatedSecretResponse,
  sentinelSchemaResponse,
  subscriptionResponse,
  testDeliveryResponse,
  createSubscriptionBody,
  deliveriesQuery,
  levelParams,
  recoverBody,
  rotateSecretBody,
  recoverResponse,
  listQuery,
  subscriptionParams,
  updateSubscriptionBody,
} from './webhooks.schemas';

import { eventCatalogueAt } from './operational-events';

type Handler = (ctx: LevelContext, req: Request) => unknown;

interface WebhookRoute extends Omit<RouteSpec, 'handler' | 'path'> {
  suffix: string;
  handle: Handler;
}

/** The subscription fields of the body, without the password that confirms a sensitive change (never stored or audited). */
const subscriptionInput = (req: Request) => withoutCurrentPassword((req.body ?? {}) as Record<string, unknown>) as never;

function webhookRouteTable(deps: AppDeps, limiters: RateLimiters): WebhookRoute[] {
  const confirmer = (req: Request) => requestConfirmer(deps, limiters, req);
  return [
    {
      method: 'get', suffix: '/events', scope: 'webhooks:read', summary: 'List the supported event types',
      schemas: { params: levelParams },
      response: eventTypesResponse,
      handle: (ctx) => ({ data: eventCatalogueAt(ctx.level).map((e) => ({ type: e.type, description: e.description })) }),
    },
    {
      method: 'post', suffix: '/subscriptions', scope: 'webhooks:create', status: 201,
      summary:
        'Create a subscription; the response carries the signing secret, once. A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { params: levelParams, body: createSubscriptionBody },
      response: createdSubscriptionResponse,
      sudoMode: true,
      handle: (ctx, req) => createSubscription(deps, ctx, subscriptionInput(req), acting(req), confirmer(req)),
    },
    {
      method: 'get', suffix: '/subscriptions', scope: 'webhooks:read', summary: 'List subscriptions',
      schemas: { params: levelParams, query: listQuery },
      response: page(subscriptionResponse),
      handle: (ctx, req) => listSubscriptions(deps, ctx, req.query as never),
    },
    {
      method: 'get', suffix: '/subscriptions/:id', scope: 'webhooks:read', summary: 'Read one subscription',
      schemas: { params: subscriptionParams },
      response: subscriptionResponse,
      handle: async (ctx, req) => presentSubscription(await findSubscription(deps, ctx, idParam(req)), deps.clock.now()),
    },
    {
      method: 'patch', suffix: '/subscriptions/:id', scope: 'webhooks:update',
      summary:
        'Update name, URL, events, active status, filters or payload format. A new URL, or turning a disabled subscription back on, from a session signed in more than 10 minutes ago needs current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { params: subscriptionParams, body: updateSubscriptionBody },
      response: subscriptionResponse,
      sudoMode: true,
      handle: (ctx, req) => updateSubscription(deps, ctx, idParam(req), subscriptionInput(req), acting(req), confirmer(req)),
    },
    {
      method: 'delete', suffix: '/subscriptions/:id', scope: 'webhooks:delete', summary: 'Soft-delete a subscription',
      schemas: { params: subscriptionParams },
      handle: (ctx, req) => deleteSubscription(deps, ctx, idParam(req), acting(req)),
    },
    {
      method: 'post', suffix: '/subscriptions/:id/rotate-secret', scope: 'webhooks:update',
      summary:
        'Rotate the signing secret; the previous one keeps signing for 72 hours. A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED); a caller demoted below admin while it runs: 403, no new secret',
      schemas: { params: subscriptionParams, body: rotateSecretBody },
      response: rotatedSecretResponse,
      sudoMode: true,
      handle: (ctx, req) => rotateSecret(deps, ctx, idParam(req), acting(req), confirmer(req)),
    },
    {
      method: 'post', suffix: '/subscriptions/:id/test', scope: 'webhooks:update', status: 202,
      summary: 'Send a synthetic webhook.test delivery to this subscription (409 when the subscription is disabled)',
      schemas: { params: subscriptionParams },
      response: testDeliveryResponse,
      handle: (ctx, req) => sendTestEvent(deps, ctx, idParam(req), acting(req)),
    },
    {
      method: 'get', suffix: '/subscriptions/:id/sentinel-schema', scope: 'webhooks:read',
      summary: 'Log Analytics columns and DCR stream declaration for the microsoft_sentinel records of this subscription',
      schemas: { params: subscriptionParams },
      response: sentinelSchemaResponse,
      handle: (ctx, req) => subscriptionSentinelSchema(deps, ctx, idParam(req)),
    },
    {
      method: 'get', suffix: '/deliveries', scope: 'webhooks:read', summary: 'List deliveries with their payload snapshots',
      schemas: { params: levelParams, query: deliveriesQuery },
      response: page(deliveryResponse),
      handle: (ctx, req) => listDeliveries(deps, ctx, req.query as never),
    },
    {
      method: 'get', suffix: '/deliveries/:id/attempts', scope: 'webhooks:read', summary: 'Attempt log of a delivery',
      schemas: { params: subscriptionParams },
      response: attemptsResponse,
      handle: (ctx, req) => listAttempts(deps, ctx, idParam(req)),
    },
    {
      method: 'get', suffix: '/deliveries/:id', scope: 'webhooks:read', summary: 'Read one delivery with its payload snapshot',
      schemas: { params: subscriptionParams },
      response: deliveryResponse,
      handle: (ctx, req) => readDelivery(deps, ctx, idParam(req)),
    },
    {
      method: 'post', suffix: '/deliveries/:id/resend', scope: 'webhooks:update', status: 202,
      summary: 'Send a finished delivery again as a new delivery (same event and payload, redelivery_of set)',
      schemas: { params: subscriptionParams },
      response: deliveryResponse,
      handle: (ctx, req) => resendDelivery(deps, ctx, idParam(req), acting(req)),
    },
    {
      method: 'post', suffix: '/subscriptions/:id/recover', scope: 'webhooks:update', status: 202,
      summary: 'Re-queue the failed deliveries of a time window (at most 30 days back, 10,000 per call, each once)',
      schemas: { params: subscriptionParams, body: recoverBody },
      response: recoverResponse,
      handle: (ctx, req) => recoverDeliveries(deps, ctx, idParam(req), req.body, acting(req)),
    },
  ];
}

function atLevel(deps: AppDeps, level: LevelDefinition, route: WebhookRoute): RouteSpec {
  const { suffix, handle, ...spec } = route;
  return {
    ...spec,
    path: `${level.basePath}${suffix}`,
    handler: async (req) => handle(await level.resolve(deps, principalOf(req), req.params as Record<string, string>), req),
  };
}

export function webhookRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  const table = webhookRouteTable(deps, limiters);
  return LEVELS.flatMap((level) => table.map((route) => atLevel(deps, level, route)));
}
