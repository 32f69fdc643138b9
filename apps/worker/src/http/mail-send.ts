// The e-mail leg of a notification target's delivery: the rendered message goes through the mail transport
// (SMTP or the outbox folder) to the target's recipients, as ONE message so a retry never half-delivers, addressed in
// Bcc: no recipient sees the others' addresses (they may be people of different companies). The result
// has the shape of an HTTP exchange, so the attempt is recorded, retried and counted for health like any other.
import type { WorkerDeps } from '../deps';
import { createMailer } from '@svc/mail';
import type { RenderedNotification } from '@svc/webhooks';
import type { HttpResult } from './post';

export async function sendNotificationMail(deps: WorkerDeps, subscriptionId: string, rendered: RenderedNotification): Promise<HttpResult> {
  const started = performance.now();
  const took = () => Math.round(performance.now() - started);
  try {
    const target = await deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: subscriptionId }, select: { emailRecipients: true } });
    if (target.emailRecipients.length === 0) throw new Error('the target has no recipients');
    const mailer = deps.mailer ?? createMailer(deps.config.mail);
    await mailer.send({ bcc: target.emailRecipients, subject: rendered.subject ?? '', text: rendered.body.toString('utf8') });
    return { response: null, body: Buffer.alloc(0), error: null, durationMs: took() };
  } catch (err) {
    const error = err instanceof Error ? err : new Error(String(err));
    return { response: null, body: Buffer.alloc(0), error: Object.assign(new Error(`mail: ${error.message}`), { code: 'EMAIL' }), durationMs: took() };
  }
}
