// The three notification channels' message formats, rendered from one NotificationMessage: Slack Block Kit (an
// incoming webhook's body), a Microsoft Teams Adaptive Card (a Workflows webhook's body) and a plain-text e-mail.
import { oneLine } from '@svc/domain';
import type { Envelope } from '../envelope';
import type { RenderedPayload } from '../render/options';
import { notificationMessage, type NotificationMessage, type NotificationOptions } from './message';

export const NOTIFICATION_KINDS = ['slack', 'teams', 'email'] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

export function isNotificationKind(value: unknown): value is NotificationKind {
  return typeof value === 'string' && (NOTIFICATION_KINDS as readonly string[]).includes(value);
}

/** A rendered notification; e-mails also carry their subject. */
export interface RenderedNotification extends RenderedPayload {
  subject?: string;
}

// Slack's documented limits: header text 150 characters, a section's fields at most 10 of 2,000 characters.
const SLACK_HEADER_MAX = 150;
const SLACK_MAX_FIELDS = 10;

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
/** Slack mrkdwn treats &, < and > as control characters (https://api.slack.com/reference/surfaces/formatting). */
export const escapeSlack = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const json = (value: unknown): RenderedPayload => ({ body: Buffer.from(JSON.stringify(value), 'utf8'), contentType: 'application/json' });

export function slackBlocks(message: NotificationMessage) {
  const blocks: unknown[] = [{ type: 'header', text: { type: 'plain_text', text: clip(message.headline, SLACK_HEADER_MAX), emoji: false } }];
  if (message.facts.length > 0) {
    blocks.push({
      type: 'section',
      fields: message.facts.slice(0, SLACK_MAX_FIELDS).map((f) => ({ type: 'mrkdwn', text: `*${escapeSlack(f.label)}*\n${escapeSlack(f.value)}` })),
    });
  }
  blocks.push(
    { type: 'actions', elements: [{ type: 'button', text: { type: 'plain_text', text: 'Open in the dashboard' }, url: message.link }] },
    { type: 'context', elements: [{ type: 'mrkdwn', text: escapeSlack(message.context) }] },
  );
  // `text` is the notification's fallback (push notifications, screen readers).
  return { text: message.headline, blocks };
}

export function teamsCard(message: NotificationMessage) {
  return {
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: {
          $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
          type: 'AdaptiveCard',
          version: '1.4',
          body: [
            { type: 'TextBlock', text: message.headline, weight: 'Bolder', size: 'Medium', wrap: true },
            ...(message.facts.length > 0 ? [{ type: 'FactSet', facts: message.facts.map((f) => ({ title: f.label, value: f.value })) }] : []),
            { type: 'TextBlock', text: message.context, isSubtle: true, size: 'Small', wrap: true },
          ],
          actions: [{ type: 'Action.OpenUrl', title: 'Open in the dashboard', url: message.link }],
        },
      },
    ],
  };
}

export function emailText(message: NotificationMessage): { subject: string; text: string } {
  // The headline and the facts quote what others wrote (a finding's title from a scanner, a report's title, a
  // component's name): each stays on its own line, so none can write a header, a line or a link of its own.
  const headline = oneLine(message.headline);
  const width = Math.max(0, ...message.facts.map((f) => f.label.length));
  const facts = message.facts.map((f) => `${`${f.label}:`.padEnd(width + 2)}${oneLine(f.value)}`);
  const text = [headline, '', ...facts, '', `Open in the dashboard: ${message.link}`, '', message.context, ''].join('\n');
  return { subject: `[Security] ${headline}`, text };
}

/** Renders an event for a notification channel. */
export function renderNotification(kind: NotificationKind, envelope: Envelope, options: NotificationOptions): RenderedNotification {
  const message = notificationMessage(envelope, options);
  switch (kind) {
    case 'slack':
      return json(slackBlocks(message));
    case 'teams':
      return json(teamsCard(message));
    case 'email': {
      const { subject, text } = emailText(message);
      return { body: Buffer.from(text, 'utf8'), contentType: 'text/plain; charset=utf-8', subject };
    }
    default:
      throw new TypeError(`Unknown notification kind: ${String(kind)}`);
  }
}
