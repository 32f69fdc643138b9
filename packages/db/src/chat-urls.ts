// Chat webhook URLs (Slack incoming webhooks, Teams workflows) are credentials: whoever holds one can post to the
// channel. They are sealed at rest in webhook_subscriptions.url_enc; `url` keeps only scheme://host[:port], which is
// all the API ever shows (url_host) and all a pg_dump shows.
//
// Rows written before url_enc existed hold the whole URL in `url`. A migration cannot seal (no node crypto, no key),
// so the API and the worker both run sealPlainChatUrls at start-up: each such row is sealed and rewritten once,
// guarded on its plain value (concurrent start-ups and a concurrent PATCH are harmless). Until then the worker reads
// the plain `url` (chatUrlOf), so a delivery never waits for the step.
import type { PrismaClient } from './generated/prisma/client';
import { seal } from './sealed';

export const CHAT_TARGET_KINDS = ['slack', 'teams'] as const;

/** The stored columns of a chat webhook URL: the origin in `url`, the whole URL sealed. */
export function sealedChatUrl(url: string, key: Buffer): { url: string; urlEnc: string } {
  return { url: new URL(url).origin, urlEnc: seal(url, key) };
}

/** The URL a subscription's requests go to: the sealed one when there is one, else the plain column. */
export function chatUrlOf(subscription: { url: string; urlEnc: string | null }, open: (sealed: string) => string): string {
  return subscription.urlEnc === null ? subscription.url : open(subscription.urlEnc);
}

/** Seals every chat target's plain URL; answers how many rows it rewrote. */
export async function sealPlainChatUrls(prisma: PrismaClient, key: Buffer, batch = 500): Promise<number> {
  let sealed = 0;
  let after = '';
  for (;;) {
    const rows = await prisma.webhookSubscription.findMany({
      where: { kind: { in: [...CHAT_TARGET_KINDS] }, urlEnc: null, url: { not: '' }, id: { gt: after } },
      select: { id: true, url: true },
      orderBy: { id: 'asc' },
      take: batch,
    });
    for (const row of rows) {
      let columns: { url: string; urlEnc: string };
      try {
        columns = sealedChatUrl(row.url, key);
      } catch {
        continue; // never a valid URL (the API refuses those): nothing to protect, nothing the worker could send to
      }
      const { count } = await prisma.webhookSubscription.updateMany({ where: { id: row.id, urlEnc: null, url: row.url }, data: columns });
      sealed += count;
    }
    if (rows.length < batch) return sealed;
    after = rows[rows.length - 1].id;
  }
}
