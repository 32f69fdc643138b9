// The sweep of security notices (a maintenance job every SECURITY_NOTICE_SWEEP_INTERVAL_MS): sends the notices the
// API did not (its mail server refused or was down, or it stopped after the change committed), to the account's
// current address, backing off, for 24 h. The claiming, sending and recording is @svc/outbox's security-notices.ts,
// shared with the API's own send after the commit; the wording is @svc/domain's.
import { createMailer } from '@svc/mail';
import { sweepSecurityNotices, type NoticeSweepResult } from '@svc/outbox';
import type { WorkerDeps } from './deps';

export type { NoticeSweepResult } from '@svc/outbox';

export async function runSecurityNoticeSweep(deps: WorkerDeps): Promise<NoticeSweepResult> {
  const mailer = deps.mailer ?? createMailer(deps.config.mail);
  const result = await sweepSecurityNotices({ ...deps, mailer });
  if (result.sent + result.failed + result.gave_up > 0) deps.logger.info('Security notices swept', { ...result });
  return result;
}
