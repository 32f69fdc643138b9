// Which secrets sign an attempt (SPEC "Signing" step 3): the current one, plus the previous one while its grace
// window after a rotation lasts. Both are stored sealed; the new secret comes first in the header.
// A standard_webhooks subscription gets the Standard Webhooks headers too, from the same secrets.
import type { WebhookSubscription } from '@svc/db';
import { buildSignatureHeader, standardWebhookHeaders } from '@svc/webhooks';

type SecretColumns = Pick<WebhookSubscription, 'secretEnc' | 'previousSecretEnc' | 'previousSecretExpiresAt'>;
type SigningColumns = SecretColumns & Pick<WebhookSubscription, 'signatureScheme'>;

/** How a sealed column is opened (the worker's memoized unseal). */
export type OpenSealed = (sealed: string) => string;

export function signingSecrets(subscription: SecretColumns, now: Date, open: OpenSealed): string[] {
  const secrets = [open(subscription.secretEnc)];
  const { previousSecretEnc, previousSecretExpiresAt } = subscription;
  if (previousSecretEnc && previousSecretExpiresAt && previousSecretExpiresAt.getTime() > now.getTime()) {
    secrets.push(open(previousSecretEnc));
  }
  return secrets;
}

/** The signature timestamp of an attempt: Unix seconds of the attempt's start. */
export function signatureTimestamp(now: Date): number {
  return Math.floor(now.getTime() / 1000);
}

export interface AttemptSignatures {
  /** X-Service-Signature, sent in both schemes (a receiver can switch verifiers before or after the scheme changes). */
  signature: string;
  /** webhook-id, webhook-timestamp, webhook-signature of a standard_webhooks subscription; empty otherwise. */
  standard: Record<string, string>;
}

/** Every signature header of one attempt; `messageId` is the delivery id (the same for each attempt, per Standard Webhooks). */
export function attemptSignatures(
  messageId: string,
  body: Buffer,
  timestamp: number,
  subscription: SigningColumns,
  now: Date,
  open: OpenSealed,
): AttemptSignatures {
  const secrets = signingSecrets(subscription, now, open);
  const signature = buildSignatureHeader(body, timestamp, secrets);
  const standard = subscription.signatureScheme === 'standard_webhooks' ? standardWebhookHeaders(messageId, timestamp, body, secrets) : {};
  return { signature, standard };
}
