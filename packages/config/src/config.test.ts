import os from 'node:os';
import { ConfigError, loadConfig } from './config';

const productionSecrets = {
  JWT_SECRET: 'x'.repeat(40),
  ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
  API_KEY_PEPPER: 'p'.repeat(40),
};

describe('loadConfig', () => {
  it('gives working development defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      nodeEnv: 'development',
      port: 3000,
      sessionTtlSeconds: 48 * 3600,
      rateLimitPerMinute: 600,
      loginRateLimitPerMinute: 10,
      totpMaxFailures: 5,
      passwordReset: { perEmailPerHour: 5, perIpPerHour: 30 },
      databasePoolSize: 10,
      availability: { redisCommandTimeoutMs: 1000, databaseConnectTimeoutMs: 2000, readinessTimeoutMs: 1000 },
    });
    expect(config.webhooks).toMatchObject({
      maxAttempts: 8,
      backoffBaseMs: 30_000,
      backoffMaxMs: 6 * 3600 * 1000,
      timeoutMs: 10_000,
      maxPayloadBytes: 256 * 1024,
      allowedHosts: [],
      secretGraceHours: 72,
      hecAck: { timeoutMs: 60_000, pollMs: 5_000, waitMs: 2_000 },
      health: { failingAfterFailures: 3, disableAfterFailures: 10, disableMinSpanMs: 24 * 3600 * 1000 },
      retentionDays: 30,
    });
    expect(config.encryptionKey).toHaveLength(32);
  });

  it("lets one organization's writes use half the database pool at once by default, at least one", () => {
    expect(loadConfig({}).organizationWritesInFlight).toBe(5);
    expect(loadConfig({ DATABASE_POOL_SIZE: '25' }).organizationWritesInFlight).toBe(12);
    expect(loadConfig({ DATABASE_POOL_SIZE: '1' }).organizationWritesInFlight).toBe(1);
    expect(loadConfig({ ORGANIZATION_WRITES_IN_FLIGHT: '8' }).organizationWritesInFlight).toBe(8);
    expect(() => loadConfig({ ORGANIZATION_WRITES_IN_FLIGHT: '0' })).toThrow(/ORGANIZATION_WRITES_IN_FLIGHT/);
  });

  it("lets all organizations' writes together use three quarters of the database pool at once by default, at least one", () => {
    expect(loadConfig({}).writesInFlight).toBe(7);
    expect(loadConfig({ DATABASE_POOL_SIZE: '4' }).writesInFlight).toBe(3);
    expect(loadConfig({ DATABASE_POOL_SIZE: '1' }).writesInFlight).toBe(1);
    expect(loadConfig({ WRITES_IN_FLIGHT: '20' }).writesInFlight).toBe(20);
    expect(() => loadConfig({ WRITES_IN_FLIGHT: '0' })).toThrow(/WRITES_IN_FLIGHT/);
    expect(() => loadConfig({ WRITES_IN_FLIGHT: 'many' })).toThrow(/WRITES_IN_FLIGHT/);
  });

  it("leaves the other organizations a write turn by default: the turns of all above one organization's, within the pool", () => {
    // Found by the review of a9466b5: a pool of 2 gave 1 and 1, and ORGANIZATION_WRITES_IN_FLIGHT=8 with the pool of
    // 10 gave 8 and 7, so one organization's edits waiting behind its own deletion held every turn of all.
    for (let pool = 2; pool <= 40; pool += 1) {
      const config = loadConfig({ DATABASE_POOL_SIZE: String(pool) });
      expect({ pool, above: config.writesInFlight > config.organizationWritesInFlight, within: config.writesInFlight <= pool })
        .toEqual({ pool, above: true, within: true });
    }
    expect(loadConfig({ DATABASE_POOL_SIZE: '2' }).writesInFlight).toBe(2);
    expect(loadConfig({ ORGANIZATION_WRITES_IN_FLIGHT: '8' }).writesInFlight).toBe(9);
    // No more than the pool: with one connection, one write at a time. One organization's turns the whole pool
    // already: more turns of all would leave reads nothing and the others no write turn all the same.
    expect(loadConfig({ DATABASE_POOL_SIZE: '1' }).writesInFlight).toBe(1);
    expect(loadConfig({ DATABASE_POOL_SIZE: '4', ORGANIZATION_WRITES_IN_FLIGHT: '4' }).writesInFlight).toBe(3);
    expect(loadConfig({ DATABASE_POOL_SIZE: '4', ORGANIZATION_WRITES_IN_FLIGHT: '3' }).writesInFlight).toBe(4);
  });

  it('waits 30 s for a write turn by default, and refuses a wait too short to mean anything or beyond 10 minutes', () => {
    expect(loadConfig({}).writeTurnTimeoutMs).toBe(30_000);
    expect(loadConfig({ WRITE_TURN_TIMEOUT_MS: '5000' }).writeTurnTimeoutMs).toBe(5_000);
    expect(() => loadConfig({ WRITE_TURN_TIMEOUT_MS: '10' })).toThrow(/WRITE_TURN_TIMEOUT_MS/);
    expect(() => loadConfig({ WRITE_TURN_TIMEOUT_MS: '600001' })).toThrow(/WRITE_TURN_TIMEOUT_MS/);
  });

  it('reads the HEC acknowledgement timeout and poll interval, and refuses values too small to mean anything', () => {
    expect(loadConfig({ WEBHOOK_HEC_ACK_TIMEOUT_MS: '30000', WEBHOOK_HEC_ACK_POLL_MS: '2000' }).webhooks.hecAck).toEqual({ timeoutMs: 30_000, pollMs: 2_000, waitMs: 2_000 });
    // The ack polls' wait is WEBHOOK_SLOW_ATTEMPT_MS whether per-subscription isolation is on or off.
    expect(loadConfig({ WEBHOOK_ISOLATION: 'false', WEBHOOK_SLOW_ATTEMPT_MS: '500' }).webhooks.hecAck.waitMs).toBe(500);
    expect(() => loadConfig({ WEBHOOK_HEC_ACK_POLL_MS: '0' })).toThrow(/WEBHOOK_HEC_ACK_POLL_MS/);
    expect(() => loadConfig({ WEBHOOK_HEC_ACK_TIMEOUT_MS: 'soon' })).toThrow(/WEBHOOK_HEC_ACK_TIMEOUT_MS/);
  });

  it('sizes the per-subscription in-flight cap to the live workers by default (one worker\'s here), so a lone busy subscription uses every slot', () => {
    expect(loadConfig({}).webhooks.isolation).toEqual({
      minInFlight: 4,
      maxInFlight: 64,
      maxInFlightFollowsWorkers: true,
      slowAttemptMs: 2_000,
      breakerFailures: 3,
      breakerOpenMs: 30_000,
      breakerMaxOpenMs: 600_000,
    });
    expect(loadConfig({ WORKER_CONCURRENCY: '100' }).webhooks.isolation?.maxInFlight).toBe(100);
    expect(loadConfig({ WORKER_CONCURRENCY: '2' }).webhooks.isolation?.maxInFlight).toBe(4);
    expect(loadConfig({ WORKER_CONCURRENCY: '100', WEBHOOK_MAX_IN_FLIGHT: '20' }).webhooks.isolation).toMatchObject({ maxInFlight: 20, maxInFlightFollowsWorkers: false });
    expect(() => loadConfig({ WEBHOOK_MIN_IN_FLIGHT: '8', WEBHOOK_MAX_IN_FLIGHT: '4' })).toThrow(/WEBHOOK_MAX_IN_FLIGHT/);
    expect(loadConfig({ WEBHOOK_ISOLATION: 'false' }).webhooks.isolation).toBeNull();
  });

  it('links e-mails to the local instance on its own port unless PUBLIC_BASE_URL says otherwise', () => {
    expect(loadConfig({}).publicBaseUrl).toBe('http://localhost:3000');
    expect(loadConfig({ PORT: '3300' }).publicBaseUrl).toBe('http://localhost:3300');
    expect(loadConfig({ PORT: '3300', PUBLIC_BASE_URL: 'https://security.example.com/' }).publicBaseUrl).toBe('https://security.example.com');
  });

  it('takes the Entra ID authority host from AZURE_AUTHORITY_HOST, without a trailing slash', () => {
    expect(loadConfig({}).azure.authorityHost).toBe('https://login.microsoftonline.com');
    expect(loadConfig({ AZURE_AUTHORITY_HOST: 'https://login.microsoftonline.us/' }).azure.authorityHost).toBe('https://login.microsoftonline.us');
  });

  it.each([
    ['PORT', 'eighty', /PORT/],
    ['DATABASE_URL', 'mysql://root@localhost/db', /DATABASE_URL/],
    ['REDIS_URL', 'not a url', /REDIS_URL/],
    ['ENCRYPTION_KEY', Buffer.alloc(16).toString('base64'), /ENCRYPTION_KEY/],
    ['JWT_SECRET', 'short', /JWT_SECRET/],
    ['NODE_ENV', 'staging', /NODE_ENV/],
    ['AZURE_AUTHORITY_HOST', 'http://login.microsoftonline.com', /AZURE_AUTHORITY_HOST/],
    ['WEBHOOK_MAX_ATTEMPTS', '0', /WEBHOOK_MAX_ATTEMPTS/],
    ['API_KEY_CACHE_TTL_SECONDS', '-1', /API_KEY_CACHE_TTL_SECONDS/],
    ['API_KEY_CACHE_TTL_SECONDS', '3600', /API_KEY_CACHE_TTL_SECONDS/],
  ])('refuses a malformed %s and names it', (name, value, pattern) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(pattern);
  });

  it('refuses outage timeouts and pool sizes that make no sense, naming them', () => {
    expect(() => loadConfig({ READINESS_TIMEOUT_MS: '0', DATABASE_POOL_SIZE: 'many', REDIS_COMMAND_TIMEOUT_MS: '-5' })).toThrow(
      /READINESS_TIMEOUT_MS.*DATABASE_POOL_SIZE|DATABASE_POOL_SIZE.*READINESS_TIMEOUT_MS/,
    );
    expect(() => loadConfig({ REDIS_COMMAND_TIMEOUT_MS: '-5' })).toThrow(/REDIS_COMMAND_TIMEOUT_MS/);
  });

  it('reads how long the API waits at shutdown for work left after answers (10 s), and the worker for its jobs (20 s)', () => {
    expect(loadConfig({}).shutdownDrainTimeoutMs).toBe(10_000);
    expect(loadConfig({ SHUTDOWN_DRAIN_TIMEOUT_MS: '0' }).shutdownDrainTimeoutMs).toBe(0);
    expect(loadConfig({ SHUTDOWN_DRAIN_TIMEOUT_MS: '2500' }).shutdownDrainTimeoutMs).toBe(2_500);
    for (const bad of ['-1', 'soon', '1.5', '600001']) expect(() => loadConfig({ SHUTDOWN_DRAIN_TIMEOUT_MS: bad })).toThrow(/SHUTDOWN_DRAIN_TIMEOUT_MS/);
    expect(loadConfig({}).workerShutdownTimeoutMs).toBe(20_000);
    expect(loadConfig({ WORKER_SHUTDOWN_TIMEOUT_MS: '3000' }).workerShutdownTimeoutMs).toBe(3_000);
    for (const bad of ['-1', 'soon', '1.5', '600001']) expect(() => loadConfig({ WORKER_SHUTDOWN_TIMEOUT_MS: bad })).toThrow(/WORKER_SHUTDOWN_TIMEOUT_MS/);
  });

  it('names every bad setting at once', () => {
    expect(() => loadConfig({ PORT: '-1', REDIS_URL: 'x' })).toThrow(/PORT.*REDIS_URL/);
  });

  it('refuses to start in production without explicit secrets, naming the missing ones', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', JWT_SECRET: productionSecrets.JWT_SECRET })).toThrow(
      /ENCRYPTION_KEY, API_KEY_PEPPER must be set when NODE_ENV=production/,
    );
    const config = loadConfig({ NODE_ENV: 'production', ...productionSecrets });
    expect(config.jwtSecret).toBe(productionSecrets.JWT_SECRET);
    expect(config.encryptionKey.equals(Buffer.alloc(32, 7))).toBe(true);
  });

  it('caches API-key principals for 30 s by default; 0 turns the cache off', () => {
    expect(loadConfig({}).apiKeyCacheTtlSeconds).toBe(30);
    expect(loadConfig({ API_KEY_CACHE_TTL_SECONDS: '0' }).apiKeyCacheTtlSeconds).toBe(0);
  });

  it('parses the webhook allow-list', () => {
    expect(loadConfig({ WEBHOOK_ALLOWED_HOSTS: ' 127.0.0.1:8443, receiver.test ,' }).webhooks.allowedHosts).toEqual([
      '127.0.0.1:8443',
      'receiver.test',
    ]);
  });

  it('stores source in a local directory by default, with the upload caps of the issue', () => {
    const config = loadConfig({});
    expect(config.storage).toEqual({ driver: 'local', dir: 'var/storage' });
    expect(config.source).toEqual({
      maxUploadBytes: 100 * 1024 * 1024,
      maxEntries: 5000,
      maxUncompressedBytes: 512 * 1024 * 1024,
      maxRatio: 200,
      textMaxBytes: 1024 * 1024,
      orgQuotaBytes: 10 * 1024 * 1024 * 1024,
      tempDir: os.tmpdir(),
      tempGraceMs: 60 * 60 * 1000,
      tempSweepIntervalMs: 15 * 60 * 1000,
      orphanGraceMs: 6 * 60 * 60 * 1000,
      orphanSweepIntervalMs: 60 * 60 * 1000,
    });
    expect(() => loadConfig({ SOURCE_ORG_QUOTA_BYTES: '0' })).toThrow(/SOURCE_ORG_QUOTA_BYTES/);
  });

  it('reads the S3 settings, and names what S3 is missing', () => {
    expect(
      loadConfig({ STORAGE_DRIVER: 's3', S3_BUCKET: 'src', S3_ENDPOINT: 'http://127.0.0.1:9000', S3_ACCESS_KEY_ID: 'id', S3_SECRET_ACCESS_KEY: 'secret' }).storage,
    ).toEqual({
      driver: 's3',
      bucket: 'src',
      endpoint: 'http://127.0.0.1:9000',
      region: 'us-east-1',
      credentials: { accessKeyId: 'id', secretAccessKey: 'secret' },
      forcePathStyle: true,
    });
    // Without static credentials the SDK's own chain (env, profile, instance role) applies.
    expect(loadConfig({ STORAGE_DRIVER: 's3', S3_BUCKET: 'src' }).storage).toMatchObject({ credentials: undefined, endpoint: undefined });
    expect(() => loadConfig({ STORAGE_DRIVER: 's3' })).toThrow(/S3_BUCKET/);
    expect(() => loadConfig({ STORAGE_DRIVER: 's3', S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'id' })).toThrow(/S3_SECRET_ACCESS_KEY/);
    expect(() => loadConfig({ STORAGE_DRIVER: 'ftp' })).toThrow(/STORAGE_DRIVER/);
    expect(() => loadConfig({ SOURCE_UPLOAD_MAX_BYTES: '0' })).toThrow(/SOURCE_UPLOAD_MAX_BYTES/);
  });
});

describe('loadConfig: where Redis is', () => {
  it('uses REDIS_URL alone by default', () => {
    expect(loadConfig({ REDIS_URL: 'rediss://:pw@cache.internal:6380' }).redis).toEqual({ mode: 'single', url: 'rediss://:pw@cache.internal:6380' });
  });

  it('reads a Sentinel set: sentinels, master name, passwords and TLS', () => {
    const config = loadConfig({
      REDIS_SENTINELS: 'sentinel-1:26379, sentinel-2:26379,[fd00::3]:26380',
      REDIS_SENTINEL_MASTER_NAME: 'svc-main',
      REDIS_SENTINEL_PASSWORD: 'sentinel-secret',
      REDIS_PASSWORD: 'data-secret',
      REDIS_TLS: 'true',
      REDIS_SENTINEL_TLS: 'true',
    });
    expect(config.redis).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: 'sentinel-1', port: 26379 },
        { host: 'sentinel-2', port: 26379 },
        { host: 'fd00::3', port: 26380 },
      ],
      masterName: 'svc-main',
      sentinelUsername: undefined,
      sentinelPassword: 'sentinel-secret',
      sentinelTls: true,
      username: undefined,
      password: 'data-secret',
      tls: true,
      tlsCaFile: undefined,
    });
  });

  it('reads Redis Cluster seed nodes', () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000,10.0.0.2:7000', REDIS_PASSWORD: 'pw' }).redis).toMatchObject({
      mode: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7000 },
      ],
      password: 'pw',
      tls: false,
    });
  });

  it.each([
    [{ REDIS_SENTINELS: 'sentinel-1:26379' }, /REDIS_SENTINEL_MASTER_NAME/],
    [{ REDIS_SENTINELS: 'sentinel-1', REDIS_SENTINEL_MASTER_NAME: 'm' }, /REDIS_SENTINELS: must be a comma-separated list of host:port/],
    [{ REDIS_CLUSTER_NODES: '10.0.0.1:99999' }, /REDIS_CLUSTER_NODES/],
    [{ REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_MASTER_NAME: 'm', REDIS_CLUSTER_NODES: 'b:2' }, /REDIS_SENTINELS and REDIS_CLUSTER_NODES/],
    [{ REDIS_TLS: 'maybe' }, /REDIS_TLS/],
  ])('refuses a bad Redis topology setting and names it (%o)', (env, pattern) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(pattern);
  });
});

describe('loadConfig: egress proxy', () => {
  it('is off by default and takes an http:// URL with credentials', () => {
    expect(loadConfig({}).webhooks.egressProxy).toBeUndefined();
    const proxy = loadConfig({ WEBHOOK_EGRESS_PROXY: 'http://svc:s%40cret@egress.internal:3128' }).webhooks.egressProxy!;
    expect(proxy.hostname).toBe('egress.internal');
    expect(proxy.port).toBe('3128');
    expect(decodeURIComponent(proxy.password)).toBe('s@cret');
  });

  it.each(['https://egress.internal:3128', 'socks5://egress.internal:1080', 'egress.internal:3128', 'http://egress.internal:3128/path'])(
    'refuses WEBHOOK_EGRESS_PROXY=%s and names it',
    (value) => {
      expect(() => loadConfig({ WEBHOOK_EGRESS_PROXY: value })).toThrow(/WEBHOOK_EGRESS_PROXY/);
    },
  );
});

describe('loadConfig: DNS for customer-configured names', () => {
  it("defaults to the system's name servers and a 2 s first timeout; takes ip, ip:port and [ipv6]:port", () => {
    expect(loadConfig({}).webhooks.dns).toEqual({ servers: [], timeoutMs: 2_000, tries: 2 });
    const dns = loadConfig({ WEBHOOK_DNS_SERVERS: '10.0.0.53, 10.0.0.54:5353,[2001:db8::53]:53', WEBHOOK_DNS_TIMEOUT_MS: '500' }).webhooks.dns;
    expect(dns).toEqual({ servers: ['10.0.0.53', '10.0.0.54:5353', '[2001:db8::53]:53'], timeoutMs: 500, tries: 2 });
  });

  it.each([['WEBHOOK_DNS_SERVERS', 'dns.example.com'], ['WEBHOOK_DNS_SERVERS', '10.0.0.53:99999'], ['WEBHOOK_DNS_TIMEOUT_MS', '50']])(
    'refuses %s=%s and names it',
    (name, value) => {
      expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(name));
    },
  );
});
