// Where a webhook may be sent: the URL passes the static checks of @svc/webhooks, and EVERY address its host
// resolves to is public (or the host is on the operator allow-list). The worker then connects to the very
// address returned here, so a DNS answer cannot change between the check and the connection (no rebinding).
import { lookup as systemDnsLookup, Resolver } from 'node:dns/promises';
import { classifyIpAddress, validateWebhookUrl } from '@svc/webhooks';

export interface ResolvedTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

export type TargetCheck = { ok: true; target: ResolvedTarget } | { ok: false; reason: string };

export type Lookup = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

/** How customer-configured names are resolved (WEBHOOK_DNS_SERVERS, WEBHOOK_DNS_TIMEOUT_MS). */
export interface DnsSettings {
  /** Name servers (`ip` or `ip:port`); empty: the system's (/etc/resolv.conf). */
  servers: readonly string[];
  /** A query's first timeout (c-ares doubles it on each retry). */
  timeoutMs: number;
  /** Tries per name server. */
  tries: number;
}

export const DEFAULT_DNS_SETTINGS: DnsSettings = { servers: [], timeoutMs: 2_000, tries: 2 };

/**
 * The operating system's resolver (getaddrinfo: /etc/hosts, then DNS). It runs on libuv's thread pool, four threads
 * shared with bcrypt, file reads and the rest, and with no timeout of its own: kept for the operator's allow-listed
 * hosts (localhost, /etc/hosts names), never for a name a customer chose.
 */
const systemLookup: Lookup = (hostname) => systemDnsLookup(hostname, { all: true, verbatim: true });

const resolvers = new WeakMap<DnsSettings, Resolver>();

function resolverFor(settings: DnsSettings): Resolver {
  let resolver = resolvers.get(settings);
  if (!resolver) {
    resolver = new Resolver({ timeout: settings.timeoutMs, tries: settings.tries });
    if (settings.servers.length > 0) resolver.setServers([...settings.servers]);
    resolvers.set(settings, resolver);
  }
  return resolver;
}

/**
 * A customer-configured name through DNS (c-ares): asked on the event loop, not on the thread pool, and given up
 * after the settings' timeouts. A name server that never answers (anyone can run one for their own domain) then
 * holds no thread: through getaddrinfo, four such lookups stalled every other lookup of the process, and the
 * API's bcrypt (logins) behind them, for the system resolver's whole timeout. IPv4 addresses first, then IPv6.
 */
export function dnsLookup(settings: DnsSettings = DEFAULT_DNS_SETTINGS): Lookup {
  const resolver = resolverFor(settings);
  return async (hostname) => {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(hostname), resolver.resolve6(hostname)]);
    const addresses = [
      ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
      ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
    ];
    if (addresses.length === 0) throw v4.status === 'rejected' ? v4.reason : new Error(`ENODATA: ${hostname} has no address`);
    return addresses;
  };
}

export async function resolveWebhookTarget(
  rawUrl: string,
  options: { allowedHosts?: readonly string[]; lookup?: Lookup; dns?: DnsSettings } = {},
): Promise<TargetCheck> {
  const checked = validateWebhookUrl(rawUrl, { allowedHosts: options.allowedHosts });
  if (!checked.ok) return { ok: false, reason: checked.reason };
  if (checked.literalIp) {
    const family = checked.literalIp.includes(':') ? 6 : 4;
    return { ok: true, target: { url: checked.url, address: checked.literalIp, family } };
  }
  let addresses: Array<{ address: string; family: number }>;
  try {
    const lookup = options.lookup ?? (checked.allowListed ? systemLookup : dnsLookup(options.dns));
    addresses = await lookup(checked.url.hostname);
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
