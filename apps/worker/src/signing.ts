// Which secrets sign an attempt (SPEC "Signing" step 3): the current one, plus the previous one while its grace
// window after a rotation lasts. Both are stored sealed; the new secret comes first in the header.
import { unseal, type WebhookSubscription } from '@svc/db';
import { buildSignatureHeader } from '@svc/webhooks';

type SecretColumns = Pick<WebhookSubscription, 'secretEnc' | 'previousSecretEnc' | 'previousSecretExpiresAt'>;

export function signingSecrets(subscription: SecretColumns, now: Date, key: Buffer): string[] {
  const secrets = [unseal(subscription.secretEnc, key)];
  const { previousSecretEnc, previousSecretExpiresAt } = subscription;
  if (previousSecretEnc && previousSecretExpiresAt && previousSecretExpiresAt.getTime() > now.getTime()) {
    secrets.push(unseal(previousSecretEnc, key));
  }
  return secrets;
}

/** The signature timestamp of an attempt: Unix seconds of the attempt's start. */
export function signatureTimestamp(now: Date): number {
  return Math.floor(now.getTime() / 1000);
}

export function signatureHeader(body: Buffer, timestamp: number, subscription: SecretColumns, now: Date, key: Buffer): string {
  return buildSignatureHeader(body, timestamp, signingSecrets(subscription, now, key));
}
