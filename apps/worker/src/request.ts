// The headers of a delivery request (SPEC "Payload formats and headers"), plus User-Agent and the subscription's
// optional Authorization value (e.g. `Splunk <HEC token>`), stored sealed, and a Splunk HEC request channel.
import type { WebhookDelivery, WebhookSubscription } from '@svc/db';
import type { OpenSealed } from './signing';
import type { RenderedPayload } from '@svc/webhooks';

export const USER_AGENT = 'Service-Webhooks/1.0';

export interface SignedAttempt {
  rendered: RenderedPayload;
  timestamp: number;
  signature: string;
  /** The Standard Webhooks headers (standard_webhooks subscriptions), else empty. */
  standard?: Record<string, string>;
}

export function deliveryHeaders(
  delivery: Pick<WebhookDelivery, 'id' | 'eventType' | 'payloadFormat'>,
  subscription: Pick<WebhookSubscription, 'authorizationEnc' | 'splunkChannel'>,
  signed: SignedAttempt,
  open: OpenSealed,
): Record<string, string> {
  return {
    'Content-Type': signed.rendered.contentType,
    'X-Service-Event': delivery.eventType,
    'X-Service-Delivery': delivery.id,
    'X-Service-Timestamp': String(signed.timestamp),
    'X-Service-Signature': signed.signature,
    'X-Service-Format': delivery.payloadFormat,
    'User-Agent': USER_AGENT,
    ...signed.standard,
    ...(subscription.authorizationEnc && { Authorization: open(subscription.authorizationEnc) }),
    // HEC tokens with indexer acknowledgement refuse requests without a channel.
    ...(subscription.splunkChannel && { 'X-Splunk-Request-Channel': subscription.splunkChannel }),
  };
}
