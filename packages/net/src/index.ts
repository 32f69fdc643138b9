// Where a webhook may be sent: the URL passes the static checks of @svc/webhooks, and EVERY address its host
// resolves to is public (or the host is on the operator allow-list). The worker then connects to the very
// address returned here, so a DNS answer cannot change between the check and the connection (no rebinding).
import { lookup as dnsLookup } from 'node:dns/promises';
import { classifyIpAddress, validateWebhookUrl } from '@svc/webhooks';

export interface ResolvedTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

export type TargetCheck = { ok: true; target: ResolvedTarget } | { ok: false; reason: string };

export type Lookup = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

const systemLookup: Lookup = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

export async function resolveWebhookTarget(
  rawUrl: string,
  options: { allowedHosts?: readonly string[]; lookup?: Lookup } = {},
): Promise<TargetCheck> {
  const checked = validateWebhookUrl(rawUrl, { allowedHosts: options.allowedHosts });
  if (!checked.ok) return { ok: false, reason: checked.reason };
  if (checked.literalIp) {
    const family = checked.literalIp.includes(':') ? 6 : 4;
    return { ok: true, target: { url: checked.url, address: checked.literalIp, family } };
  }
  let addresses: Array<{ address: string; family: number }>;
  try {
    addresses = await (options.lookup ?? systemLookup)(checked.url.hostname);
  } catch {
    return { ok: false, reason: 'unresolvable' };
  }
  if (addresses.length === 0) return { ok: false, reason: 'unresolvable' };
  if (!checked.allowListed) {
    for (const { address } of addresses) {
      const classification = classifyIpAddress(address);
      if (!classification.public) return { ok: false, reason: classification.reason };
    }
  }
  const first = addresses[0];
  return { ok: true, target: { url: checked.url, address: first.address, family: first.family === 6 ? 6 : 4 } };
}

/** Human-readable text for a rejection reason, used in 422 details and attempt logs. */
export function describeTargetRejection(reason: string): string {
  switch (reason) {
    case 'not_https':
      return 'the URL must use https';
    case 'unparsable':
      return 'the URL cannot be parsed';
    case 'credentials_in_url':
      return 'the URL must not contain credentials';
    case 'unresolvable':
      return 'the host does not resolve';
    case 'too_long':
      return 'the URL is too long';
    default:
      return `the host is not a public address (${reason.replace(/_/g, ' ')})`;
  }
}
