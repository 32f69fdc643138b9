// Tells an organization's owner and admins, once, that a subscription turned failing or disabled. Called after
// the transaction that turned it (and audited it) committed; a mail failure is logged, never retried per attempt.
import { oneLine } from '@svc/domain';
import { createMailer, mailErrorForLog } from '@svc/mail';
import type { WorkerDeps } from './deps';
import type { AttemptRecord, HealthChange } from './record';

/** The subscription's page in the dashboard (served by the API at PUBLIC_BASE_URL, as the e-mailed links are). */
export function dashboardLink(
  publicBaseUrl: string,
  subscription: { id: string; level: string; projectId: string | null; assessmentId: string | null; kind?: string },
): string {
  const id = encodeURIComponent(subscription.id);
  if (subscription.kind !== undefined && subscription.kind !== 'webhook') return `${publicBaseUrl}/notification-targets`;
  if (subscription.level === 'project' && subscription.projectId) return `${publicBaseUrl}/projects/${encodeURIComponent(subscription.projectId)}/webhooks/${id}`;
  if (subscription.level === 'assessment' && subscription.assessmentId) {
    return `${publicBaseUrl}/assessments/${encodeURIComponent(subscription.assessmentId)}/webhooks/${id}`;
  }
  return `${publicBaseUrl}/webhooks/${id}`;
}

/** Where the deliveries go, without anything that could be a credential (a chat URL's path) or a recipient's address. */
function destinationLine(subscription: { kind: string; url: string; emailRecipients: string[] }): string {
  if (subscription.kind === 'email') return `Recipients: ${subscription.emailRecipients.length} e-mail address${subscription.emailRecipients.length === 1 ? '' : 'es'}`;
  try {
    return `URL host: ${new URL(subscription.url).host}`;
  } catch {
    return 'URL host: (none)';
  }
}

export async function notifyHealthChange(
  deps: WorkerDeps,
  change: HealthChange,
  last: Pick<AttemptRecord, 'responseStatus' | 'error'> & { outcome: string },
): Promise<void> {
  let recipients: string[] = [];
  try {
    const subscription = await deps.prisma.webhookSubscription.findUniqueOrThrow({
      where: { id: change.subscriptionId },
      include: { organization: { select: { name: true } } },
    });
    const members = await deps.prisma.membership.findMany({
      where: { organizationId: subscription.organizationId, role: { in: ['owner', 'admin'] }, user: { status: 'active' } },
      select: { user: { select: { email: true } } },
    });
    const level = subscription.level === 'organization' ? 'organization' : `${subscription.level} ${subscription.projectId ?? subscription.assessmentId}`;
    const lastError = last.responseStatus !== null ? `HTTP ${last.responseStatus}` : `${last.outcome}${last.error ? `: ${last.error}` : ''}`;
    const what = subscription.kind === 'webhook' ? 'webhook subscription' : `${subscription.kind === 'email' ? 'e-mail' : subscription.kind} notification target`;
    const subject = `${what[0].toUpperCase()}${what.slice(1)} "${oneLine(subscription.name)}" of ${oneLine(subscription.organization.name)} is ${change.status}`;
    const text = [
      `The ${what} "${oneLine(subscription.name)}" (${subscription.id}, ${level} level) is now ${change.status}.`,
      change.status === 'disabled'
        ? `Why: ${change.reason ?? 'disabled'}. It receives nothing until it is re-enabled (PATCH active: true).`
        : `Why: ${subscription.consecutiveFailures} consecutive deliveries failed. It still receives deliveries; it is disabled if failures continue.`,
      `Last error: ${oneLine(lastError)}`,
      destinationLine(subscription),
      `Open it in the dashboard: ${dashboardLink(deps.config.publicBaseUrl, subscription)}`,
    ].join('\n');
    const mailer = deps.mailer ?? createMailer(deps.config.mail);
    recipients = [...new Set(members.map((m) => m.user.email))];
    for (const to of recipients) await mailer.send({ to, subject, text });
  } catch (err) {
    deps.logger.error('Could not send a webhook health notification', { subscription_id: change.subscriptionId, error: mailErrorForLog(err, recipients) });
  }
}
