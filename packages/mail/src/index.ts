// Outgoing mail, shared by the API (verification, invitations) and the worker (API-key expiry warnings): SMTP
// through nodemailer when SMTP_URL is set; otherwise every message is written as a JSON file in the outbox folder,
// so a developer (or a test) can read the links it carries.
import { randomBytes } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Transporter } from 'nodemailer';

export { isRecipientRefused, mailErrorForLog } from './log';

/**
 * One message. `to` is a single visible recipient; `bcc` sends one message to several people without any of them
 * seeing the others (SMTP: envelope recipients only, no Bcc header; the outbox file lists them as `bcc`).
 */
export type MailMessage = { subject: string; text: string } & ({ to: string; bcc?: undefined } | { to?: undefined; bcc: string[] });

export interface Mailer {
  send(message: MailMessage): Promise<void>;
}

export interface MailerOptions {
  smtpUrl?: string;
  from: string;
  outboxDir: string;
}

export function createMailer(options: MailerOptions): Mailer {
  if (options.smtpUrl) return smtpMailer(options.smtpUrl, options.from);
  return {
    async send(message) {
      await mkdir(options.outboxDir, { recursive: true });
      const file = `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(6).toString('base64url')}.json`;
      // Written aside, then renamed: a reader of the folder never sees a half-written message.
      const partial = path.join(options.outboxDir, `.${file}.partial`);
      await writeFile(partial, JSON.stringify({ from: options.from, ...message }, null, 2));
      await rename(partial, path.join(options.outboxDir, file));
    },
  };
}

/** nodemailer is loaded with the first message, not at start-up: a worker rarely sends mail. */
function smtpMailer(smtpUrl: string, from: string): Mailer {
  let transport: Promise<Transporter> | undefined;
  return {
    async send(message) {
      transport ??= import('nodemailer').then((nodemailer) => nodemailer.default.createTransport(smtpUrl));
      await (await transport).sendMail({ from, ...message });
    },
  };
}
