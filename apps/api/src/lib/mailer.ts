// Outgoing mail: SMTP through nodemailer when SMTP_URL is set; otherwise every message is written as a JSON
// file in the outbox folder, so a developer (or a test) can read the links it carries.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { randomToken } from './crypto';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(message: MailMessage): Promise<void>;
}

export function createMailer(options: { smtpUrl?: string; from: string; outboxDir: string }): Mailer {
  if (options.smtpUrl) {
    const transport = nodemailer.createTransport(options.smtpUrl);
    return { send: async (m) => void (await transport.sendMail({ from: options.from, ...m })) };
  }
  return {
    async send(message) {
      await mkdir(options.outboxDir, { recursive: true });
      const file = `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomToken(6)}.json`;
      await writeFile(path.join(options.outboxDir, file), JSON.stringify({ from: options.from, ...message }, null, 2));
    },
  };
}
