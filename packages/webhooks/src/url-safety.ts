// Pure URL and IP-address classification for webhook targets (DESIGN.md "URL safety"). No DNS here: the caller
// resolves a hostname, classifies every address with classifyIpAddress and connects to the address it checked.
// Node's custom DNS `lookup` is skipped for literal IP hosts, so validateWebhookUrl classifies those itself.
import { isIP } from 'node:net';

export type IpRejectionReason =
  | 'unparsable'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link_local'
  | 'cloud_metadata'
  | 'cgnat'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'documentation'
  | 'benchmarking'
  | 'protocol_assignment'
  | 'unique_local'
  | 'site_local'
  | 'scoped_address';

/** How a non-public IPv4 address was carried inside an IPv6 one, when it was. */
export type Ipv4Embedding = 'ipv4_mapped' | 'ipv4_compatible' | 'ipv4_translated' | 'nat64' | '6to4' | 'teredo';

export type IpClassification =
  | { public: true }
  | { public: false; reason: IpRejectionReason; embeddedIn?: Ipv4Embedding };

interface Ipv4Range {
  base: number; // unsigned 32-bit
  prefix: number;
  reason: IpRejectionReason;
}

function ipv4ToInt(a: number, b: number, c: number, d: number): number {
  return ((a << 24) >>> 0) + (b << 16) + (c << 8) + d;
}

function cidr4(text: string, reason: IpRejectionReason): Ipv4Range {
  const [address, prefix] = text.split('/');
  const octets = parseIpv4(address);
  if (!octets) throw new Error(`bad range ${text}`);
  return { base: ipv4ToInt(...octets), prefix: Number(prefix), reason };
}

// Most specific first: the first range that contains the address gives the reason.
const IPV4_NON_PUBLIC: readonly Ipv4Range[] = [
  cidr4('169.254.169.254/32', 'cloud_metadata'),
  // Azure's platform address (WireServer, VM agent goal state and extension settings, platform DNS): reachable from
  // every Azure VM although it is outside the private ranges.
  cidr4('168.63.129.16/32', 'cloud_metadata'),
  cidr4('255.255.255.255/32', 'broadcast'),
  cidr4('0.0.0.0/8', 'unspecified'),
  cidr4('10.0.0.0/8', 'private'),
  cidr4('100.64.0.0/10', 'cgnat'),
  cidr4('127.0.0.0/8', 'loopback'),
  cidr4('169.254.0.0/16', 'link_local'),
  cidr4('172.16.0.0/12', 'private'),
  cidr4('192.0.0.0/24', 'protocol_assignment'),
  cidr4('192.0.2.0/24', 'documentation'),
  cidr4('192.88.99.0/24', 'reserved'), // deprecated 6to4 relay anycast
  cidr4('192.168.0.0/16', 'private'),
  cidr4('198.18.0.0/15', 'benchmarking'),
  cidr4('198.51.100.0/24', 'documentation'),
  cidr4('203.0.113.0/24', 'documentation'),
  cidr4('224.0.0.0/4', 'multicast'),
  cidr4('240.0.0.0/4', 'reserved'),
];

/** Strict dotted quad: four decimal octets 0..255, no leading zeros (which some parsers read as octal). */
function parseIpv4(text: string): [number, number, number, number] | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const octets: number[] = [];
  for (const part of parts) {
    if (!/^(?:0|[1-9]\d{0,2})$/.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    octets.push(n);
  }
  return octets as [number, number, number, number];
}

function classifyIpv4Int(value: number): IpClassification {
  for (const range of IPV4_NON_PUBLIC) {
    const mask = range.prefix === 0 ? 0 : (~0 << (32 - range.prefix)) >>> 0;
    if (((value & mask) >>> 0) === ((range.base & mask) >>> 0)) {
      return { public: false, reason: range.reason };
    }
  }
  return { public: true };
}

/** Parses an IPv6 address (optionally with a trailing dotted quad, no zone) into eight 16-bit groups; null if it is not one. */
export function parseIpv6(text: string): number[] | null {
  if (text.length === 0 || text.length > 45 || !/^[0-9A-Fa-f:.]+$/.test(text)) return null;
  let head = text;
  let tail: number[] = [];
  if (text.includes('.')) {
    const lastColon = text.lastIndexOf(':');
    const v4 = parseIpv4(text.slice(lastColon + 1));
    if (!v4 || lastColon < 0) return null;
    tail = [(v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]];
    head = text.slice(0, lastColon + 1);
    // "::1.2.3.4" leaves "::"; "1::ffff:1.2.3.4" leaves "1::ffff:" -> drop the trailing single colon.
    if (head.endsWith(':') && !head.endsWith('::')) head = head.slice(0, -1);
  }
  const halves = head.split('::');
  if (halves.length > 2) return null;
  const parseGroups = (s: string): number[] | null => {
    if (s === '') return [];
    const groups: number[] = [];
    for (const g of s.split(':')) {
      if (!/^[0-9A-Fa-f]{1,4}$/.test(g)) return null;
      groups.push(parseInt(g, 16));
    }
    return groups;
  };
  const left = parseGroups(halves[0]);
  if (!left) return null;
  if (halves.length === 1) {
    const all = [...left, ...tail];
    return all.length === 8 ? all : null;
  }
  const right = parseGroups(halves[1]);
  if (!right) return null;
  const present = left.length + right.length + tail.length;
  if (present > 7) return null;
  return [...left, ...new Array<number>(8 - present).fill(0), ...right, ...tail];
}

function groupsToIpv4(high: number, low: number): number {
  return ((high << 16) >>> 0) + low;
}

function embedded(v4: number, via: Ipv4Embedding): IpClassification {
  const inner = classifyIpv4Int(v4);
  return inner.public ? inner : { public: false, reason: inner.reason, embeddedIn: via };
}

function inPrefix(groups: number[], prefixGroups: number[], bits: number): boolean {
  for (let i = 0; i < 8 && bits > 0; i += 1) {
    const take = Math.min(16, bits);
    const mask = (0xffff << (16 - take)) & 0xffff;
    if ((groups[i] & mask) !== ((prefixGroups[i] ?? 0) & mask)) return false;
    bits -= take;
  }
  return true;
}

function classifyIpv6Groups(g: number[]): IpClassification {
  const zeros = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (g.every((x) => x === 0)) return { public: false, reason: 'unspecified' };
  if (zeros(7) && g[7] === 1) return { public: false, reason: 'loopback' };
  // ::ffff:a.b.c.d (IPv4-mapped)
  if (zeros(5) && g[5] === 0xffff) return embedded(groupsToIpv4(g[6], g[7]), 'ipv4_mapped');
  // ::ffff:0:a.b.c.d (IPv4-translated, RFC 2765)
  if (zeros(4) && g[4] === 0xffff && g[5] === 0) return embedded(groupsToIpv4(g[6], g[7]), 'ipv4_translated');
  // ::a.b.c.d (deprecated IPv4-compatible): never a usable public destination.
  if (zeros(6)) {
    const inner = embedded(groupsToIpv4(g[6], g[7]), 'ipv4_compatible');
    return inner.public ? { public: false, reason: 'reserved', embeddedIn: 'ipv4_compatible' } : inner;
  }
  // 64:ff9b::/96 well-known NAT64 prefix: judged by the IPv4 address it reaches.
  if (inPrefix(g, [0x64, 0xff9b, 0, 0, 0, 0], 96)) return embedded(groupsToIpv4(g[6], g[7]), 'nat64');
  // 64:ff9b:1::/48 local-use NAT64 (RFC 8215): a local network's translator.
  if (inPrefix(g, [0x64, 0xff9b, 1], 48)) return { public: false, reason: 'private' };
  if (inPrefix(g, [0x100, 0, 0, 0], 64)) return { public: false, reason: 'reserved' }; // discard-only
  if (inPrefix(g, [0xfe80], 10)) return { public: false, reason: 'link_local' };
  if (inPrefix(g, [0xfec0], 10)) return { public: false, reason: 'site_local' };
  if (inPrefix(g, [0xfc00], 7)) return { public: false, reason: 'unique_local' };
  if (inPrefix(g, [0xff00], 8)) return { public: false, reason: 'multicast' };
  if (inPrefix(g, [0x2001, 0x0db8], 32)) return { public: false, reason: 'documentation' };
  if (inPrefix(g, [0x3fff], 20)) return { public: false, reason: 'documentation' }; // RFC 9637
  if (inPrefix(g, [0x2001, 0x0002, 0], 48)) return { public: false, reason: 'benchmarking' };
  if (inPrefix(g, [0x2001, 0x0010], 28) || inPrefix(g, [0x2001, 0x0020], 28)) {
    return { public: false, reason: 'reserved' }; // ORCHID / ORCHIDv2, not routable
  }
  if (inPrefix(g, [0x5f00], 16)) return { public: false, reason: 'reserved' }; // SRv6 SIDs
  // Teredo 2001::/32: server IPv4 in groups 2-3, client IPv4 (bit-inverted) in groups 6-7.
  if (inPrefix(g, [0x2001, 0x0000], 32)) {
    const server = embedded(groupsToIpv4(g[2], g[3]), 'teredo');
    if (!server.public) return server;
    return embedded(groupsToIpv4(g[6] ^ 0xffff, g[7] ^ 0xffff), 'teredo');
  }
  // 6to4 2002::/16: IPv4 in groups 1-2.
  if (inPrefix(g, [0x2002], 16)) return embedded(groupsToIpv4(g[1], g[2]), '6to4');
  // Only global unicast 2000::/3 is public; everything else is unassigned or special.
  if (!inPrefix(g, [0x2000], 3)) return { public: false, reason: 'reserved' };
  return { public: true };
}

/**
 * Classifies one IP address text: `{ public: true }` only for a public unicast address. Accepts dotted-quad IPv4
 * and IPv6 (optionally in brackets); anything else, including IPv4 with leading zeros, is `unparsable`.
 * An IPv6 zone id (`fe80::1%eth0`) is `scoped_address`.
 */
export function classifyIpAddress(ip: string): IpClassification {
  if (typeof ip !== 'string') return { public: false, reason: 'unparsable' };
  let text = ip.trim();
  if (text.startsWith('[') && text.endsWith(']')) text = text.slice(1, -1);
  if (text.includes('%')) {
    return parseIpv6(text.slice(0, text.indexOf('%'))) ? { public: false, reason: 'scoped_address' } : { public: false, reason: 'unparsable' };
  }
  const v4 = parseIpv4(text);
  if (v4) return classifyIpv4Int(ipv4ToInt(...v4));
  if (text.includes(':')) {
    const groups = parseIpv6(text);
    if (groups && isIP(text) === 6) return classifyIpv6Groups(groups);
  }
  return { public: false, reason: 'unparsable' };
}

export type UrlRejectionReason =
  | 'unparsable'
  | 'not_https'
  | 'credentials_in_url'
  | 'missing_host'
  | 'localhost'
  | 'too_long'
  | IpRejectionReason;

export type WebhookUrlValidation =
  | {
      ok: true;
      url: URL;
      /** The literal IP of the host (IPv6 without brackets), or null when the host is a name the caller must resolve. */
      literalIp: string | null;
      /** True when the host passed only because the allow-list names it. */
      allowListed: boolean;
    }
  | { ok: false; reason: UrlRejectionReason };

export interface ValidateWebhookUrlOptions {
  /** Operator allow-list (empty by default): exact `host` or `host:port` entries, IPv6 as `[::1]:8443` or `::1`. */
  allowedHosts?: readonly string[];
}

export const MAX_WEBHOOK_URL_LENGTH = 2048;

function normaliseHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.')) h = h.slice(0, -1);
  if (isIP(h) === 6) {
    try {
      return new URL(`https://[${h}]/`).hostname.slice(1, -1);
    } catch {
      return h;
    }
  }
  return h;
}

function parseAllowEntry(entry: string): { host: string; port: string | null } | null {
  const text = entry.trim();
  if (text === '') return null;
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(text);
  if (bracketed) return { host: normaliseHost(bracketed[1]), port: bracketed[2] ?? null };
  if ((text.match(/:/g) ?? []).length > 1) return { host: normaliseHost(text), port: null };
  const withPort = /^(.+):(\d{1,5})$/.exec(text);
  if (withPort) return { host: normaliseHost(withPort[1]), port: withPort[2] };
  return { host: normaliseHost(text), port: null };
}

/**
 * True when `host` (a hostname, an IPv4 address, or an IPv6 address with or without brackets) with `port`
 * (empty/null means the https default, 443) is named by an allow-list entry: `host` matches any port,
 * `host:port` only that port. Host comparison ignores case and a trailing dot; IPv6 is compared in canonical form.
 */
export function isAllowListed(host: string, port: string | number | null | undefined, allowList: readonly string[] | undefined): boolean {
  if (!allowList || allowList.length === 0) return false;
  const wantedHost = normaliseHost(host);
  const wantedPort = port === null || port === undefined || port === '' ? '443' : String(Number(port));
  return allowList.some((entry) => {
    const parsed = parseAllowEntry(entry);
    if (!parsed || parsed.host !== wantedHost) return false;
    return parsed.port === null || String(Number(parsed.port)) === wantedPort;
  });
}

/**
 * Static checks of a webhook URL: parseable, `https:`, no user name or password, a host, not `localhost`, and a
 * literal-IP host (IPv4, or IPv6 in brackets) must be public. A hostname passes here; the caller resolves it and
 * classifies every address. Hosts named by `allowedHosts` pass the localhost and IP checks (never the https one).
 */
export function validateWebhookUrl(url: string, options: ValidateWebhookUrlOptions = {}): WebhookUrlValidation {
  if (typeof url !== 'string') return { ok: false, reason: 'unparsable' };
  if (url.length > MAX_WEBHOOK_URL_LENGTH) return { ok: false, reason: 'too_long' };
  let parsed: URL;
  try {
    parsed = new URL(url.trim());
  } catch {
    return { ok: false, reason: 'unparsable' };
  }
  if (parsed.protocol !== 'https:') return { ok: false, reason: 'not_https' };
  if (parsed.username !== '' || parsed.password !== '') return { ok: false, reason: 'credentials_in_url' };
  const hostname = parsed.hostname;
  if (hostname === '') return { ok: false, reason: 'missing_host' };

  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  const literalIp = isIP(bare) !== 0 ? bare : null;
  const allowListed = isAllowListed(hostname, parsed.port, options.allowedHosts);
  if (allowListed) return { ok: true, url: parsed, literalIp, allowListed: true };

  if (literalIp !== null) {
    const classification = classifyIpAddress(literalIp);
    if (!classification.public) return { ok: false, reason: classification.reason };
  } else {
    const name = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
    if (name === 'localhost' || name.endsWith('.localhost')) return { ok: false, reason: 'localhost' };
  }
  return { ok: true, url: parsed, literalIp, allowListed: false };
}
