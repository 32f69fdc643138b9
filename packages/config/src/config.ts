// The one configuration module of the service. Every setting comes from the environment, is validated with joi
// at start-up, and a missing or malformed one stops the process with a message naming it.
import { Resolver } from 'node:dns';
import { isIPv4, isIPv6 } from 'node:net';
import os from 'node:os';
import Joi from 'joi';
import { DEFAULT_HEALTH_RULES } from '@svc/domain';

const HOUR_MS = 3600 * 1000;
import { DEFAULT_BACKOFF, DEFAULT_ISOLATION_RULES, MAX_ATTEMPTS, type IsolationRules } from '@svc/domain';

const DEV_JWT_SECRET = 'dev-only-jwt-secret-change-me-0123456789abcdef';
// 32 bytes, base64: development only.
const DEV_ENCRYPTION_KEY = 'ZGV2LW9ubHktZW5jcnlwdGlvbi1rZXktMzItYnl0ZXM=';
const DEV_API_KEY_PEPPER = 'dev-only-api-key-pepper-change-me-0123456789';

const SECRET_SETTINGS = ['JWT_SECRET', 'ENCRYPTION_KEY', 'API_KEY_PEPPER'] as const;

const base64Key32 = Joi.string().custom((value: string, helpers) => {
  if (Buffer.from(value, 'base64').length !== 32) return helpers.error('any.invalid');
  return value;
}, '32-byte base64 key');

// Client secrets travel to these URLs: https in production, http allowed elsewhere (loopback test servers).
const providerUrl = () =>
  Joi.string().when('NODE_ENV', {
    is: 'production',
    then: Joi.string().uri({ scheme: ['https'] }),
    otherwise: Joi.string().uri({ scheme: ['http', 'https'] }),
  });

const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/;

/** Comma-separated `host:port` entries (IPv6 in brackets); at least one when set. */
const hostPortList = () =>
  Joi.string()
    .allow('')
    .custom((value: string, helpers) => {
      const entries = splitList(value);
      if (entries.some((entry) => !HOST_PORT.test(entry) || Number(entry.replace(HOST_PORT, '$2')) > 65535)) {
        return helpers.message({ custom: 'must be a comma-separated list of host:port' });
      }
      return value;
    }, 'host:port list');

const splitList = (value: string) => value.split(',').map((s) => s.trim()).filter(Boolean);

export interface HostPort {
  host: string;
  port: number;
}

function parseHostPorts(value: string | undefined): HostPort[] {
  return splitList(value ?? '').map((entry) => {
    const [, host, port] = HOST_PORT.exec(entry)!;
    return { host: host.replace(/^\[|\]$/g, ''), port: Number(port) };
  });
}

// An http:// proxy URL (CONNECT tunnels; TLS stays end to end to the receiver), credentials allowed.
const egressProxyUrl = Joi.string()
  .allow('')
  .uri({ scheme: ['http'] })
  .custom((value: string, helpers) => {
    if (value === '') return value;
    const url = new URL(value);
    if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
      return helpers.message({ custom: 'must be http://[user:password@]host:port with no path' });
    }
    return value;
  }, 'proxy URL');

/** ip, ip:port (IPv4) or [ipv6]:port, or a bare IPv6 address; a port within 1-65535. */
function isNameServer(entry: string): boolean {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  const v4 = /^([\d.]+)(?::(\d+))?$/.exec(entry);
  const [address, port] = bracketed ? [bracketed[1], bracketed[2]] : v4 ? [v4[1], v4[2]] : [entry, undefined];
  const portOk = port === undefined || (Number(port) >= 1 && Number(port) <= 65_535);
  return portOk && (bracketed || !v4 ? isIPv6(address!) : isIPv4(address!));
}

// Name servers as c-ares takes them: ip, ip:port, [ipv6]:port; checked by c-ares itself, so a bad entry stops start-up.
const dnsServerList = Joi.string()
  .allow('')
  .default('')
  .custom((value: string, helpers) => {
    try {
      const servers = splitList(value);
      if (!servers.every(isNameServer)) throw new Error('not a name server');
      new Resolver().setServers(servers);
    } catch {
      return helpers.message({ custom: 'must be a comma-separated list of ip or ip:port ([ipv6]:port) name servers' });
    }
    return value;
  }, 'name server list');

const schema = Joi.object({
  NODE_ENV: Joi.string().valid('development', 'test', 'production').default('development'),
  HOST: Joi.string().default('0.0.0.0'),
  PORT: Joi.number().port().default(3000),
  // Default: http://localhost:<PORT>, so that links in e-mails reach a local instance on any port.
  PUBLIC_BASE_URL: Joi.string().uri({ scheme: ['http', 'https'] }),
  TRUST_PROXY: Joi.alternatives(Joi.boolean(), Joi.number().integer().min(0), Joi.string()).default(false),
  LOG_LEVEL: Joi.string().valid('error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly').default('info'),

  DATABASE_URL: Joi.string()
    .uri({ scheme: ['postgres', 'postgresql'] })
    .default('postgresql://postgres@127.0.0.1:5432/security_service'),
  REDIS_URL: Joi.string().uri({ scheme: ['redis', 'rediss'] }).default('redis://127.0.0.1:6379'),
  // Redis Sentinel (docs/operations.md "Production topology"): the sentinels' host:port list and the master's name. When set,
  // REDIS_URL is not used; REDIS_USERNAME, REDIS_PASSWORD and REDIS_TLS apply to the master and replicas.
  REDIS_SENTINELS: hostPortList(),
  REDIS_SENTINEL_MASTER_NAME: Joi.string().pattern(/^[A-Za-z0-9_.-]+$/).when('REDIS_SENTINELS', {
    is: Joi.string().min(1).required(),
    then: Joi.required(),
  }),
  REDIS_SENTINEL_USERNAME: Joi.string().allow(''),
  REDIS_SENTINEL_PASSWORD: Joi.string().allow(''),
  REDIS_SENTINEL_TLS: Joi.boolean().default(false),
  // Redis Cluster: host:port of some nodes (the others are discovered). When set, REDIS_URL is not used.
  REDIS_CLUSTER_NODES: hostPortList(),
  REDIS_USERNAME: Joi.string().allow(''),
  REDIS_PASSWORD: Joi.string().allow(''),
  REDIS_TLS: Joi.boolean().default(false),
  // PEM file of the CA that signed the Redis servers' (and sentinels') certificates, when not a public one.
  REDIS_TLS_CA_FILE: Joi.string().allow(''),
  // Prefix of every Redis key the service writes (queues, rate limits, one-time tokens).
  REDIS_PREFIX: Joi.string().pattern(/^[A-Za-z0-9_.:-]+$/).default('svc'),
  // Outages: how long a request may wait on Redis or for a PostgreSQL connection before it fails with 503, and how
  // long /readyz waits for each check. docs/operations.md "Outages".
  // Connections each process (API or worker) keeps to PostgreSQL at most.
  DATABASE_POOL_SIZE: Joi.number().integer().min(1).max(500).default(10),
  // Write requests of one organization an API instance runs at once; the others wait their turn in the instance,
  // holding no connection. Unset: half of DATABASE_POOL_SIZE, at least 1. docs/operations.md "Outages".
  ORGANIZATION_WRITES_IN_FLIGHT: Joi.number().integer().min(1).max(500),
  // Write requests of all organizations together an API instance runs at once, so that reads keep the rest of the
  // pool. Unset: three quarters of DATABASE_POOL_SIZE, and at least ORGANIZATION_WRITES_IN_FLIGHT + 1 where that is
  // within the pool (writesInFlightByDefault).
  WRITES_IN_FLIGHT: Joi.number().integer().min(1).max(500),
  // How long a write request waits for its turn before it answers 503, nothing changed.
  WRITE_TURN_TIMEOUT_MS: Joi.number().integer().min(100).max(600_000).default(30_000),
  REDIS_COMMAND_TIMEOUT_MS: Joi.number().integer().min(50).max(60_000).default(1000),
  DATABASE_CONNECT_TIMEOUT_MS: Joi.number().integer().min(100).max(60_000).default(2000),
  READINESS_TIMEOUT_MS: Joi.number().integer().min(50).max(60_000).default(1000),
  // At SIGTERM, how long the API waits for work its requests left running after their answers (audit entries,
  // mails) before it closes its connections; what still runs then is lost. docs/operations.md "Operations".
  SHUTDOWN_DRAIN_TIMEOUT_MS: Joi.number().integer().min(0).max(600_000).default(10_000),
  WORKER_SHUTDOWN_TIMEOUT_MS: Joi.number().integer().min(0).max(600_000).default(20_000),

  JWT_SECRET: Joi.string().min(32),
  ENCRYPTION_KEY: base64Key32,
  API_KEY_PEPPER: Joi.string().min(32),
  SESSION_TTL_SECONDS: Joi.number().integer().min(60).default(48 * 3600),
  PARTIAL_TOKEN_TTL_SECONDS: Joi.number().integer().min(30).default(300),
  COOKIE_SECURE: Joi.boolean().default(true),
  BCRYPT_ROUNDS: Joi.number().integer().min(4).max(15).default(12),
  // How long an API instance may reuse the principal an API key resolved to (0: look it up on every request).
  // Revocations, member removals and role changes still apply on the next request (Redis auth epochs).
  API_KEY_CACHE_TTL_SECONDS: Joi.number().integer().min(0).max(300).default(30),

  RATE_LIMIT_PER_MINUTE: Joi.number().integer().min(1).default(600),
  LOGIN_RATE_LIMIT_PER_MINUTE: Joi.number().integer().min(1).default(10),
  TOTP_MAX_FAILURES: Joi.number().integer().min(1).default(5),
  // Password-reset requests (each may send a mail) an hour, per e-mail address and per client address.
  PASSWORD_RESET_RATE_LIMIT_PER_EMAIL: Joi.number().integer().min(1).default(5),
  PASSWORD_RESET_RATE_LIMIT_PER_IP: Joi.number().integer().min(1).default(30),
  // Published and shared reports: requests a minute to the public share routes, per token and per client IP; the
  // lifetime of an e-mailed grant when the request names none, and the longest lifetime a share may be given.
  REPORT_SHARE_RATE_LIMIT_PER_TOKEN: Joi.number().integer().min(1).default(60),
  REPORT_SHARE_RATE_LIMIT_PER_IP: Joi.number().integer().min(1).default(120),
  REPORT_SHARE_DEFAULT_TTL_DAYS: Joi.number().integer().min(1).default(30),
  REPORT_SHARE_MAX_TTL_DAYS: Joi.number().integer().min(1).default(365),

  SMTP_URL: Joi.string().uri({ scheme: ['smtp', 'smtps'] }).allow(''),
  MAIL_FROM: Joi.string().default('Security Assessment Service <no-reply@localhost>'),
  MAIL_OUTBOX_DIR: Joi.string().default('var/outbox'),
  // The dashboard's build output (apps/web/dist); empty: the one next to the API's own code.
  WEB_DIST_DIR: Joi.string().allow('').default(''),

  WEBHOOK_MAX_ATTEMPTS: Joi.number().integer().min(1).max(20).default(MAX_ATTEMPTS),
  WEBHOOK_BACKOFF_BASE_MS: Joi.number().integer().min(1).default(DEFAULT_BACKOFF.baseMs),
  WEBHOOK_BACKOFF_MAX_MS: Joi.number().integer().min(1).default(DEFAULT_BACKOFF.maxMs),
  WEBHOOK_TIMEOUT_MS: Joi.number().integer().min(100).default(10_000),
  WEBHOOK_MAX_PAYLOAD_BYTES: Joi.number().integer().min(1024).default(256 * 1024),
  // Comma-separated host or host:port entries exempt from the public-address rule. Development and tests only.
  WEBHOOK_ALLOWED_HOSTS: Joi.string().allow('').default(''),
  // PEM file with an extra CA trusted for webhook receivers (tests use a self-made CA).
  WEBHOOK_EXTRA_CA_FILE: Joi.string().allow(''),
  // HTTP CONNECT proxy every outbound call to a customer-configured address goes through (docs/operations.md "Egress proxy").
  WEBHOOK_EGRESS_PROXY: egressProxyUrl,
  WEBHOOK_SECRET_GRACE_HOURS: Joi.number().min(0).default(72),
  // Splunk HEC indexer acknowledgement (subscriptions with hec_ack): how long after an accepted event POST Splunk has
  // to report it indexed before the delivery is sent again, and the wait between two polls of the ack endpoint.
  WEBHOOK_HEC_ACK_TIMEOUT_MS: Joi.number().integer().min(100).default(60_000),
  WEBHOOK_HEC_ACK_POLL_MS: Joi.number().integer().min(50).default(5_000),
  // Microsoft Entra ID authority for Sentinel subscriptions' client-credentials tokens (sovereign clouds, tests).
  AZURE_AUTHORITY_HOST: Joi.string().uri({ scheme: ['https'] }).default('https://login.microsoftonline.com'),
  // Subscription health: consecutive terminal delivery failures that make it `failing`, and that disable it
  // once they span at least WEBHOOK_DISABLE_MIN_SPAN_HOURS.
  WEBHOOK_FAILING_AFTER_FAILURES: Joi.number().integer().min(1).default(DEFAULT_HEALTH_RULES.failingAfterFailures),
  WEBHOOK_DISABLE_AFTER_FAILURES: Joi.number().integer().min(1).default(DEFAULT_HEALTH_RULES.disableAfterFailures),
  WEBHOOK_DISABLE_MIN_SPAN_HOURS: Joi.number().min(0).default(DEFAULT_HEALTH_RULES.disableMinSpanMs / HOUR_MS),
  // Delivery is I/O-bound: a slot mostly waits on a receiver, so a worker holds many (docs/webhooks.md "Delivery isolation").
  WORKER_CONCURRENCY: Joi.number().integer().min(1).default(64),
  // Most dead hosts fail at connect: give up on the TCP + TLS handshake well before the total timeout.
  WEBHOOK_CONNECT_TIMEOUT_MS: Joi.number().integer().min(100).default(3_000),
  // Customer-configured names are resolved through DNS on the event loop (docs/operations.md "DNS"): the name servers
  // (comma-separated ip or ip:port; empty: /etc/resolv.conf's) and a query's first timeout (doubled on its retry).
  WEBHOOK_DNS_SERVERS: dnsServerList,
  WEBHOOK_DNS_TIMEOUT_MS: Joi.number().integer().min(100).max(30_000).default(2_000),
  // Delivery isolation (docs/webhooks.md "Delivery isolation"): per-subscription in-flight cap and circuit breaker.
  WEBHOOK_ISOLATION: Joi.boolean().default(true),
  // Fair share of backlogs: the enqueue rate (deliveries per second, decaying average) beyond which a subscription's
  // deliveries go behind lighter subscriptions' (0: plain FIFO).
  WEBHOOK_FAIR_SHARE_PER_SECOND: Joi.number().integer().min(0).default(50),
  WEBHOOK_MIN_IN_FLIGHT: Joi.number().integer().min(1).default(DEFAULT_ISOLATION_RULES.minInFlight),
  // Default: the WORKER_CONCURRENCY of every live worker together. A lower cap than the workers' slots makes a lone
  // busy subscription's surplus jobs churn (fetched, held back, woken, fetched again): a c=100 drain ran at 0.2 of the
  // limit loop with a cap of 32, and two workers at c=16 with a cap of one worker's 16 delivered 0.4 as much as one.
  WEBHOOK_MAX_IN_FLIGHT: Joi.number().integer().min(Joi.ref('WEBHOOK_MIN_IN_FLIGHT')),
  WEBHOOK_SLOW_ATTEMPT_MS: Joi.number().integer().min(1).default(DEFAULT_ISOLATION_RULES.slowAttemptMs),
  WEBHOOK_BREAKER_FAILURES: Joi.number().integer().min(1).default(DEFAULT_ISOLATION_RULES.breakerFailures),
  WEBHOOK_BREAKER_OPEN_MS: Joi.number().integer().min(10).default(DEFAULT_ISOLATION_RULES.breakerOpenMs),
  WEBHOOK_BREAKER_MAX_OPEN_MS: Joi.number().integer().min(Joi.ref('WEBHOOK_BREAKER_OPEN_MS')).default(DEFAULT_ISOLATION_RULES.breakerMaxOpenMs),
  OUTBOX_RELAY_INTERVAL_MS: Joi.number().integer().min(100).default(30_000),
  OUTBOX_RELAY_AGE_MS: Joi.number().integer().min(0).default(60_000),
  RETENTION_DAYS: Joi.number().integer().min(1).default(30),
  // How often the worker runs the API-key lifecycle policy (expiry warnings, inactivity revocation).
  KEY_LIFECYCLE_INTERVAL_MS: Joi.number().integer().min(1000).default(3600 * 1000),
  // How often the worker looks for findings past their remediation SLA (finding.sla_breached).
  SLA_SCAN_INTERVAL_MS: Joi.number().integer().min(1000).default(15 * 60 * 1000),
  ERASURE_INTERVAL_MS: Joi.number().integer().min(1000).default(30 * 1000),
  ERASURE_BATCH_SIZE: Joi.number().integer().min(1).max(100000).default(2000),

  // OAuth sign-in. A provider without a client id is disabled; with one, its secret is required. Endpoint URLs
  // default to the real providers and are settings only so tests can point them at servers on loopback.
  GITHUB_CLIENT_ID: Joi.string().allow('').default(''),
  GITHUB_CLIENT_SECRET: Joi.string().allow('').when('GITHUB_CLIENT_ID', { is: Joi.string().min(1), then: Joi.required().invalid('') }),
  GITHUB_AUTHORIZE_URL: providerUrl().default('https://github.com/login/oauth/authorize'),
  GITHUB_TOKEN_URL: providerUrl().default('https://github.com/login/oauth/access_token'),
  GITHUB_API_BASE_URL: providerUrl().default('https://api.github.com'),
  GOOGLE_CLIENT_ID: Joi.string().allow('').default(''),
  GOOGLE_CLIENT_SECRET: Joi.string().allow('').when('GOOGLE_CLIENT_ID', { is: Joi.string().min(1), then: Joi.required().invalid('') }),
  // The OpenID issuer; its discovery document is `${GOOGLE_ISSUER_URL}/.well-known/openid-configuration`.
  GOOGLE_ISSUER_URL: providerUrl().default('https://accounts.google.com'),
  OAUTH_STATE_TTL_SECONDS: Joi.number().integer().min(60).max(3600).default(600),
  OAUTH_HTTP_TIMEOUT_MS: Joi.number().integer().min(100).default(10_000),

  // Prometheus metrics. The API serves GET /metrics unless METRICS_ENABLED=false; with METRICS_TOKEN set it asks
  // for `Authorization: Bearer <METRICS_TOKEN>`. The worker serves GET /metrics on METRICS_PORT (0: off).
  METRICS_ENABLED: Joi.boolean().default(true),
  METRICS_TOKEN: Joi.string().min(16).allow(''),
  METRICS_PORT: Joi.number().integer().min(0).max(65535).default(9464),

  // Storage of uploaded source archives and their extracted files: a local directory (default) or an
  // S3-compatible bucket (several API instances). docs/domain.md "Source storage".
  STORAGE_DRIVER: Joi.string().valid('local', 's3').default('local'),
  STORAGE_DIR: Joi.string().default('var/storage'),
  S3_BUCKET: Joi.string().when('STORAGE_DRIVER', { is: 's3', then: Joi.required() }),
  S3_ENDPOINT: Joi.string().uri({ scheme: ['http', 'https'] }).allow(''),
  S3_REGION: Joi.string().default('us-east-1'),
  S3_ACCESS_KEY_ID: Joi.string().allow('').default(''),
  S3_SECRET_ACCESS_KEY: Joi.string().allow('').when('S3_ACCESS_KEY_ID', { is: Joi.string().min(1), then: Joi.required().invalid('') }),
  // Path-style addressing (http://endpoint/bucket/key), which most S3-compatible servers need.
  S3_FORCE_PATH_STYLE: Joi.boolean().default(true),
  // Source uploads: the archive's size (checked while streaming: 413), and the zip-bomb caps of its contents (422).
  SOURCE_UPLOAD_MAX_BYTES: Joi.number().integer().min(1).default(100 * 1024 * 1024),
  SOURCE_MAX_ENTRIES: Joi.number().integer().min(1).default(5000),
  SOURCE_MAX_UNCOMPRESSED_BYTES: Joi.number().integer().min(1).default(512 * 1024 * 1024),
  SOURCE_MAX_RATIO: Joi.number().min(1).default(200),
  // Uncompressed bytes of source an organization may keep stored, all its archives together (422 past it).
  SOURCE_ORG_QUOTA_BYTES: Joi.number().integer().min(1).default(10 * 1024 * 1024 * 1024),
  // Upload spools (svc-upload-*) and extraction folders (svc-extract-*) live here; the API sweeps its own
  // leftovers older than SOURCE_TEMP_GRACE_MS at start and every SOURCE_TEMP_SWEEP_INTERVAL_MS (younger ones may
  // be another API process's live upload).
  SOURCE_TEMP_DIR: Joi.string().default(os.tmpdir()),
  SOURCE_TEMP_GRACE_MS: Joi.number().integer().min(0).default(60 * 60 * 1000),
  SOURCE_TEMP_SWEEP_INTERVAL_MS: Joi.number().integer().min(100).default(15 * 60 * 1000),
  // The worker's orphan sweep: stored objects under no archive row, and local .partial files, older than the grace.
  SOURCE_ORPHAN_GRACE_MS: Joi.number().integer().min(0).default(6 * 60 * 60 * 1000),
  SOURCE_ORPHAN_SWEEP_INTERVAL_MS: Joi.number().integer().min(1000).default(60 * 60 * 1000),
  // Largest file the artifacts route answers as text; larger or binary files are served as downloads.
  SOURCE_TEXT_MAX_BYTES: Joi.number().integer().min(1).default(1024 * 1024),
}).unknown(true);

export interface Config {
  nodeEnv: 'development' | 'test' | 'production';
  host: string;
  port: number;
  publicBaseUrl: string;
  /** Folder of the dashboard's build; undefined: apps/web/dist beside the API. */
  webDistDir?: string;
  trustProxy: boolean | number | string;
  logLevel: string;
  databaseUrl: string;
  databasePoolSize: number;
  /** Write requests of one organization an API instance runs at once (http/organization-turns.ts). */
  organizationWritesInFlight: number;
  /** Write requests of all organizations together an API instance runs at once (http/organization-turns.ts). */
  writesInFlight: number;
  /** How long a write request waits for its turn before it answers 503 (http/organization-turns.ts). */
  writeTurnTimeoutMs: number;
  /** The single server's URL (REDIS_URL); only used when `redis.mode` is 'single'. */
  redisUrl: string;
  /** Where Redis is: one server, a Sentinel set, or a Cluster. packages/queue `createRedis` connects to it. */
  redis: RedisTarget;
  redisPrefix: string;
  availability: {
    /** Bound on one Redis command of the API (rate limits, one-time tokens, enqueue) before it fails with 503. */
    redisCommandTimeoutMs: number;
    /** Bound on waiting for a PostgreSQL connection (pool) before the query fails with 503. */
    databaseConnectTimeoutMs: number;
    /** Bound on each /readyz check. */
    readinessTimeoutMs: number;
  };
  /** At shutdown, the API's wait for work left running after answers (apps/api/src/http/after-answer.ts). */
  shutdownDrainTimeoutMs: number;
  /** At shutdown, the worker's wait for its running jobs and the Splunk ack requests in flight (apps/worker/src/worker.ts). */
  workerShutdownTimeoutMs: number;
  jwtSecret: string;
  encryptionKey: Buffer;
  apiKeyPepper: string;
  sessionTtlSeconds: number;
  partialTokenTtlSeconds: number;
  cookieSecure: boolean;
  bcryptRounds: number;
  /** Seconds an API key's resolved principal may be reused in-process (0: off); see apps/api/src/auth/authenticate.ts. */
  apiKeyCacheTtlSeconds: number;
  rateLimitPerMinute: number;
  loginRateLimitPerMinute: number;
  totpMaxFailures: number;
  /** Password-reset requests an hour (apps/api/src/modules/auth/password-reset.ts). */
  passwordReset: { perEmailPerHour: number; perIpPerHour: number };
  /** Published and shared reports (apps/api/src/modules/report-shares). */
  reportShares: { perTokenPerMinute: number; perIpPerMinute: number; defaultTtlDays: number; maxTtlDays: number };
  mail: { smtpUrl?: string; from: string; outboxDir: string };
  webhooks: {
    maxAttempts: number;
    backoffBaseMs: number;
    backoffMaxMs: number;
    timeoutMs: number;
    maxPayloadBytes: number;
    allowedHosts: string[];
    extraCaFile?: string;
    /** HTTP CONNECT proxy for every outbound call to a customer-configured address (WEBHOOK_EGRESS_PROXY). */
    egressProxy?: URL;
    secretGraceHours: number;
    /** Splunk HEC indexer acknowledgement: deadline after the event POST, and the wait between polls. */
    hecAck: {
      timeoutMs: number;
      pollMs: number;
      /** The longest a poll waits for its channel's request (WEBHOOK_SLOW_ATTEMPT_MS, with or without isolation). */
      waitMs: number;
    };
    health: { failingAfterFailures: number; disableAfterFailures: number; disableMinSpanMs: number };
    workerConcurrency: number;
    connectTimeoutMs: number;
    /** How customer-configured names are resolved (@svc/net's DnsSettings). */
    dns: { servers: string[]; timeoutMs: number; tries: number };
    fairSharePerSecond: number;
    /** Per-subscription isolation; null when WEBHOOK_ISOLATION=false. */
    isolation: IsolationRules | null;
    relayIntervalMs: number;
    relayAgeMs: number;
    retentionDays: number;
  };
  /** Microsoft Entra ID (tokens for microsoft_sentinel subscriptions). */
  azure: { authorityHost: string };
  /** API-key lifecycle policy job (worker). */
  keyLifecycle: { intervalMs: number };
  slaScan: { intervalMs: number };
  /** How often the worker takes pending GDPR erasure requests. */
  erasure: { intervalMs: number; batchSize: number };
  metrics: { enabled: boolean; token?: string; port: number };
  storage: StorageConfig;
  source: SourceLimits;
  oauth: {
    /** How long a started sign-in (state, PKCE verifier, nonce) waits in Redis for its callback. */
    stateTtlSeconds: number;
    /** Timeout of each request to a provider (token exchange, user info, discovery, keys). */
    httpTimeoutMs: number;
    /** Absent when GITHUB_CLIENT_ID is empty: sign-in with GitHub is disabled. */
    github?: OAuthGithubConfig;
    /** Absent when GOOGLE_CLIENT_ID is empty: sign-in with Google is disabled. */
    google?: OAuthGoogleConfig;
  };
}

export type StorageConfig =
  | { driver: 'local'; dir: string }
  | {
      driver: 's3';
      bucket: string;
      endpoint?: string;
      region: string;
      credentials?: { accessKeyId: string; secretAccessKey: string };
      forcePathStyle: boolean;
    };

export interface SourceLimits {
  maxUploadBytes: number;
  maxEntries: number;
  maxUncompressedBytes: number;
  /** Largest uncompressed/compressed ratio of one entry, and of the archive as a whole. */
  maxRatio: number;
  textMaxBytes: number;
  /** Uncompressed bytes an organization may keep stored across all its archives. */
  orgQuotaBytes: number;
  tempDir: string;
  tempGraceMs: number;
  tempSweepIntervalMs: number;
  orphanGraceMs: number;
  orphanSweepIntervalMs: number;
}

function storageConfig(value: Record<string, any>): StorageConfig {
  if (value.STORAGE_DRIVER === 'local') return { driver: 'local', dir: value.STORAGE_DIR };
  return {
    driver: 's3',
    bucket: value.S3_BUCKET,
    endpoint: value.S3_ENDPOINT || undefined,
    region: value.S3_REGION,
    credentials: value.S3_ACCESS_KEY_ID
      ? { accessKeyId: value.S3_ACCESS_KEY_ID, secretAccessKey: value.S3_SECRET_ACCESS_KEY }
      : undefined,
    forcePathStyle: value.S3_FORCE_PATH_STYLE,
  };
}

/** Credentials and TLS of the Redis data nodes (Sentinel and Cluster modes; the single mode takes them from REDIS_URL). */
export interface RedisNodeAuth {
  username?: string;
  password?: string;
  tls: boolean;
  tlsCaFile?: string;
}

export type RedisTarget =
  | { mode: 'single'; url: string; tlsCaFile?: string }
  | ({
      mode: 'sentinel';
      sentinels: HostPort[];
      masterName: string;
      sentinelUsername?: string;
      sentinelPassword?: string;
      sentinelTls: boolean;
    } & RedisNodeAuth)
  | ({ mode: 'cluster'; nodes: HostPort[] } & RedisNodeAuth);

function redisTarget(value: Record<string, string | boolean | undefined>): RedisTarget {
  const nodeAuth: RedisNodeAuth = {
    username: (value.REDIS_USERNAME as string) || undefined,
    password: (value.REDIS_PASSWORD as string) || undefined,
    tls: value.REDIS_TLS as boolean,
    tlsCaFile: (value.REDIS_TLS_CA_FILE as string) || undefined,
  };
  const sentinels = parseHostPorts(value.REDIS_SENTINELS as string | undefined);
  if (sentinels.length > 0) {
    return {
      mode: 'sentinel',
      sentinels,
      masterName: value.REDIS_SENTINEL_MASTER_NAME as string,
      sentinelUsername: (value.REDIS_SENTINEL_USERNAME as string) || undefined,
      sentinelPassword: (value.REDIS_SENTINEL_PASSWORD as string) || undefined,
      sentinelTls: value.REDIS_SENTINEL_TLS as boolean,
      ...nodeAuth,
    };
  }
  const nodes = parseHostPorts(value.REDIS_CLUSTER_NODES as string | undefined);
  if (nodes.length > 0) return { mode: 'cluster', nodes, ...nodeAuth };
  return { mode: 'single', url: value.REDIS_URL as string, tlsCaFile: nodeAuth.tlsCaFile };
}

export interface OAuthGithubConfig {
  clientId: string;
  clientSecret: string;
  authorizeUrl: string;
  tokenUrl: string;
  apiBaseUrl: string;
}

export interface OAuthGoogleConfig {
  clientId: string;
  clientSecret: string;
  issuerUrl: string;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

function missingProductionSecrets(env: NodeJS.ProcessEnv): string[] {
  return SECRET_SETTINGS.filter((name) => !env[name]);
}

function organizationWritesInFlightOf(value: { ORGANIZATION_WRITES_IN_FLIGHT?: number; DATABASE_POOL_SIZE: number }): number {
  return value.ORGANIZATION_WRITES_IN_FLIGHT ?? Math.max(1, Math.floor(value.DATABASE_POOL_SIZE / 2));
}

/**
 * Three quarters of the pool, and at least one more than one organization's turns where the pool has that many: no
 * more than those, one organization's writes waiting behind its own deletion would hold every turn of all, and every
 * other organization's writes would wait for that deletion (a pool of 2 gave 1 and 1). Where one organization's
 * turns are the whole pool already, more turns of all would not help the others and would leave reads nothing.
 */
function writesInFlightByDefault(poolSize: number, organizationWritesInFlight: number): number {
  const leavingOthersOne = organizationWritesInFlight < poolSize ? organizationWritesInFlight + 1 : 0;
  return Math.max(1, Math.floor((poolSize * 3) / 4), leavingOthersOne);
}

/** Reads and validates the configuration; throws ConfigError naming every bad or missing setting. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const { value, error } = schema.validate(env, { abortEarly: false, convert: true });
  if (error) {
    const problems = error.details.map((d) => `${d.path.join('.')}: ${d.message.replace(/^"[^"]*" /, '')}`);
    throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
  }
  if (value.REDIS_SENTINELS && value.REDIS_CLUSTER_NODES) {
    throw new ConfigError('Invalid configuration: REDIS_SENTINELS and REDIS_CLUSTER_NODES are both set: a Redis is either a Sentinel set or a Cluster');
  }
  if (value.NODE_ENV === 'production') {
    const missing = missingProductionSecrets(env);
    if (missing.length > 0) {
      throw new ConfigError(`Invalid configuration: ${missing.join(', ')} must be set when NODE_ENV=production`);
    }
  }
  return {
    nodeEnv: value.NODE_ENV,
    host: value.HOST,
    port: value.PORT,
    publicBaseUrl: (value.PUBLIC_BASE_URL ?? `http://localhost:${value.PORT}`).replace(/\/$/, ''),
    webDistDir: value.WEB_DIST_DIR || undefined,
    trustProxy: value.TRUST_PROXY,
    logLevel: value.LOG_LEVEL,
    databaseUrl: value.DATABASE_URL,
    databasePoolSize: value.DATABASE_POOL_SIZE,
    organizationWritesInFlight: organizationWritesInFlightOf(value),
    writesInFlight: value.WRITES_IN_FLIGHT ?? writesInFlightByDefault(value.DATABASE_POOL_SIZE, organizationWritesInFlightOf(value)),
    writeTurnTimeoutMs: value.WRITE_TURN_TIMEOUT_MS,
    redisUrl: value.REDIS_URL,
    redis: redisTarget(value),
    redisPrefix: value.REDIS_PREFIX,
    availability: {
      redisCommandTimeoutMs: value.REDIS_COMMAND_TIMEOUT_MS,
      databaseConnectTimeoutMs: value.DATABASE_CONNECT_TIMEOUT_MS,
      readinessTimeoutMs: value.READINESS_TIMEOUT_MS,
    },
    shutdownDrainTimeoutMs: value.SHUTDOWN_DRAIN_TIMEOUT_MS,
    workerShutdownTimeoutMs: value.WORKER_SHUTDOWN_TIMEOUT_MS,
    jwtSecret: value.JWT_SECRET ?? DEV_JWT_SECRET,
    encryptionKey: Buffer.from(value.ENCRYPTION_KEY ?? DEV_ENCRYPTION_KEY, 'base64'),
    apiKeyPepper: value.API_KEY_PEPPER ?? DEV_API_KEY_PEPPER,
    sessionTtlSeconds: value.SESSION_TTL_SECONDS,
    partialTokenTtlSeconds: value.PARTIAL_TOKEN_TTL_SECONDS,
    cookieSecure: value.COOKIE_SECURE,
    bcryptRounds: value.BCRYPT_ROUNDS,
    apiKeyCacheTtlSeconds: value.API_KEY_CACHE_TTL_SECONDS,
    rateLimitPerMinute: value.RATE_LIMIT_PER_MINUTE,
    loginRateLimitPerMinute: value.LOGIN_RATE_LIMIT_PER_MINUTE,
    totpMaxFailures: value.TOTP_MAX_FAILURES,
    passwordReset: { perEmailPerHour: value.PASSWORD_RESET_RATE_LIMIT_PER_EMAIL, perIpPerHour: value.PASSWORD_RESET_RATE_LIMIT_PER_IP },
    reportShares: {
      perTokenPerMinute: value.REPORT_SHARE_RATE_LIMIT_PER_TOKEN,
      perIpPerMinute: value.REPORT_SHARE_RATE_LIMIT_PER_IP,
      defaultTtlDays: value.REPORT_SHARE_DEFAULT_TTL_DAYS,
      maxTtlDays: value.REPORT_SHARE_MAX_TTL_DAYS,
    },
    mail: { smtpUrl: value.SMTP_URL || undefined, from: value.MAIL_FROM, outboxDir: value.MAIL_OUTBOX_DIR },
    webhooks: {
      maxAttempts: value.WEBHOOK_MAX_ATTEMPTS,
      backoffBaseMs: value.WEBHOOK_BACKOFF_BASE_MS,
      backoffMaxMs: value.WEBHOOK_BACKOFF_MAX_MS,
      timeoutMs: value.WEBHOOK_TIMEOUT_MS,
      maxPayloadBytes: value.WEBHOOK_MAX_PAYLOAD_BYTES,
      allowedHosts: splitList(value.WEBHOOK_ALLOWED_HOSTS),
      extraCaFile: value.WEBHOOK_EXTRA_CA_FILE || undefined,
      egressProxy: value.WEBHOOK_EGRESS_PROXY ? new URL(value.WEBHOOK_EGRESS_PROXY) : undefined,
      secretGraceHours: value.WEBHOOK_SECRET_GRACE_HOURS,
      hecAck: { timeoutMs: value.WEBHOOK_HEC_ACK_TIMEOUT_MS, pollMs: value.WEBHOOK_HEC_ACK_POLL_MS, waitMs: value.WEBHOOK_SLOW_ATTEMPT_MS },
      health: {
        failingAfterFailures: value.WEBHOOK_FAILING_AFTER_FAILURES,
        disableAfterFailures: value.WEBHOOK_DISABLE_AFTER_FAILURES,
        disableMinSpanMs: value.WEBHOOK_DISABLE_MIN_SPAN_HOURS * HOUR_MS,
      },
      workerConcurrency: value.WORKER_CONCURRENCY,
      fairSharePerSecond: value.WEBHOOK_FAIR_SHARE_PER_SECOND,
      connectTimeoutMs: Math.min(value.WEBHOOK_CONNECT_TIMEOUT_MS, value.WEBHOOK_TIMEOUT_MS),
      dns: { servers: splitList(value.WEBHOOK_DNS_SERVERS), timeoutMs: value.WEBHOOK_DNS_TIMEOUT_MS, tries: 2 },
      isolation: value.WEBHOOK_ISOLATION
        ? {
            minInFlight: value.WEBHOOK_MIN_IN_FLIGHT,
            maxInFlight: value.WEBHOOK_MAX_IN_FLIGHT ?? Math.max(value.WEBHOOK_MIN_IN_FLIGHT, value.WORKER_CONCURRENCY),
            maxInFlightFollowsWorkers: value.WEBHOOK_MAX_IN_FLIGHT === undefined,
            slowAttemptMs: value.WEBHOOK_SLOW_ATTEMPT_MS,
            breakerFailures: value.WEBHOOK_BREAKER_FAILURES,
            breakerOpenMs: value.WEBHOOK_BREAKER_OPEN_MS,
            breakerMaxOpenMs: value.WEBHOOK_BREAKER_MAX_OPEN_MS,
          }
        : null,
      relayIntervalMs: value.OUTBOX_RELAY_INTERVAL_MS,
      relayAgeMs: value.OUTBOX_RELAY_AGE_MS,
      retentionDays: value.RETENTION_DAYS,
    },
    azure: { authorityHost: value.AZURE_AUTHORITY_HOST.replace(/\/+$/, '') },
    keyLifecycle: { intervalMs: value.KEY_LIFECYCLE_INTERVAL_MS },
    slaScan: { intervalMs: value.SLA_SCAN_INTERVAL_MS },
    erasure: { intervalMs: value.ERASURE_INTERVAL_MS, batchSize: value.ERASURE_BATCH_SIZE },
    metrics: { enabled: value.METRICS_ENABLED, token: value.METRICS_TOKEN || undefined, port: value.METRICS_PORT },
    storage: storageConfig(value),
    source: {
      maxUploadBytes: value.SOURCE_UPLOAD_MAX_BYTES,
      maxEntries: value.SOURCE_MAX_ENTRIES,
      maxUncompressedBytes: value.SOURCE_MAX_UNCOMPRESSED_BYTES,
      maxRatio: value.SOURCE_MAX_RATIO,
      textMaxBytes: value.SOURCE_TEXT_MAX_BYTES,
      orgQuotaBytes: value.SOURCE_ORG_QUOTA_BYTES,
      tempDir: value.SOURCE_TEMP_DIR,
      tempGraceMs: value.SOURCE_TEMP_GRACE_MS,
      tempSweepIntervalMs: value.SOURCE_TEMP_SWEEP_INTERVAL_MS,
      orphanGraceMs: value.SOURCE_ORPHAN_GRACE_MS,
      orphanSweepIntervalMs: value.SOURCE_ORPHAN_SWEEP_INTERVAL_MS,
    },
    oauth: {
      stateTtlSeconds: value.OAUTH_STATE_TTL_SECONDS,
      httpTimeoutMs: value.OAUTH_HTTP_TIMEOUT_MS,
      github: value.GITHUB_CLIENT_ID
        ? {
            clientId: value.GITHUB_CLIENT_ID,
            clientSecret: value.GITHUB_CLIENT_SECRET,
            authorizeUrl: value.GITHUB_AUTHORIZE_URL,
            tokenUrl: value.GITHUB_TOKEN_URL,
            apiBaseUrl: value.GITHUB_API_BASE_URL.replace(/\/$/, ''),
          }
        : undefined,
      google: value.GOOGLE_CLIENT_ID
        ? {
            clientId: value.GOOGLE_CLIENT_ID,
            clientSecret: value.GOOGLE_CLIENT_SECRET,
            issuerUrl: value.GOOGLE_ISSUER_URL,
          }
        : undefined,
    },
  };
}

/** For entry points: load the configuration or print why not and exit. */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
