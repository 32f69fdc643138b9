// The API's side of the transactional outbox: its connections and the attempt cap, for withOutbox.
import type { OutboxDeps } from '@svc/outbox';
import type { AppDeps } from '../app-deps';

export function apiOutboxDeps(deps: AppDeps): OutboxDeps {
  return { prisma: deps.prisma, deliveryQueue: deps.deliveryQueue, logger: deps.logger, maxAttempts: deps.config.webhooks.maxAttempts };
}
