// Each stored credential is bound to the destination (scheme://host:port) it was given for, in the row's
// credential_destination column; the API writes it with the credential and the worker sends the credential nowhere
// else. Rows stored before the column existed are bound here, at start-up (API and worker), to the URL they hold:
// the rule that computes a destination is code (@svc/webhooks credentialDestination, passed in), not SQL.
import type { PrismaClient } from './generated/prisma/client';
import { sealPlainChatUrls } from './chat-urls';

export type DestinationOf = (url: string) => string | null;

/** Binds every unbound stored credential to its row's current URL; answers how many rows it bound. */
export async function bindStoredCredentials(prisma: PrismaClient, destinationOf: DestinationOf, batch = 500): Promise<number> {
  let bound = 0;
  for (let after = ''; ; ) {
    const rows = await prisma.webhookSubscription.findMany({
      where: { credentialDestination: null, OR: [{ authorizationEnc: { not: null } }, { azureCredentialsEnc: { not: null } }], id: { gt: after } },
      select: { id: true, url: true },
      orderBy: { id: 'asc' },
      take: batch,
    });
    for (const { id, url } of rows) {
      const destination = destinationOf(url);
      if (destination === null) continue;
      bound += (await prisma.webhookSubscription.updateMany({ where: { id, url, credentialDestination: null }, data: { credentialDestination: destination } })).count;
    }
    if (rows.length < batch) break;
    after = rows[rows.length - 1].id;
  }
  for (let after = ''; ; ) {
    const rows = await prisma.issueExportTarget.findMany({
      where: { credentialDestination: null, credentialsEnc: { not: '' }, id: { gt: after } },
      select: { id: true, baseUrl: true },
      orderBy: { id: 'asc' },
      take: batch,
    });
    for (const { id, baseUrl } of rows) {
      const destination = destinationOf(baseUrl);
      if (destination === null) continue;
      bound += (await prisma.issueExportTarget.updateMany({ where: { id, baseUrl, credentialDestination: null }, data: { credentialDestination: destination } })).count;
    }
    if (rows.length < batch) break;
    after = rows[rows.length - 1].id;
  }
  return bound;
}

/** The start-up step of the API and the worker: plain chat URLs sealed, unbound credentials bound. */
export async function secureStoredSecrets(prisma: PrismaClient, key: Buffer, destinationOf: DestinationOf) {
  return { chatUrlsSealed: await sealPlainChatUrls(prisma, key), credentialsBound: await bindStoredCredentials(prisma, destinationOf) };
}
