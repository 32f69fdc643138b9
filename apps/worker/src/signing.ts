// Which secrets sign an attempt (SPEC "Signing" step 3): the current one, plus the previous one while its grace
// window after a rotation lasts. Both are stored sealed; the new secret comes first in the header.
import type { WebhookSubscription } from '@svc/db';
import { buildSignatureHeader } from '@svc/webhooks';

type SecretColumns = Pick<WebhookSubscription, 'secretEnc' | 'previousSecretEnc' | 'previousSecretExpiresAt'>;

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

export function signatureHeader(body: Buffer, timestamp: number, subscription: SecretColumns, now: Date, open: OpenSealed): string {
  return buildSignatureHeader(body, timestamp, signingSecrets(subscription, now, open));
}
