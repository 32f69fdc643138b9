import { createFailFastRedis, createRedis, isRedisUnavailable } from './index';

describe('isRedisUnavailable', () => {
  it.each([
    "Stream isn't writeable and enableOfflineQueue options is false",
    'Command timed out',
    'Connection is closed.',
    'Redis connection is not ready',
    'connect ECONNREFUSED 127.0.0.1:6379',
    'LOADING Redis is loading the dataset in memory',
  ])('is true for "%s"', (message) => {
    expect(isRedisUnavailable(new Error(message))).toBe(true);
  });

  it('is true for ioredis MaxRetriesPerRequestError', () => {
    const err = Object.assign(new Error('Reached the max retries per request limit (which is 1).'), { name: 'MaxRetriesPerRequestError' });
    expect(isRedisUnavailable(err)).toBe(true);
  });

  it.each(['ERR wrong number of arguments', 'WRONGTYPE Operation against a key holding the wrong kind of value', 'NOSCRIPT'])(
    'is false for a command error "%s"',
    (message) => {
      expect(isRedisUnavailable(new Error(message))).toBe(false);
    },
  );

  it('is false for what is not an error', () => {
    expect(isRedisUnavailable(undefined)).toBe(false);
    expect(isRedisUnavailable('Command timed out')).toBe(false);
  });
});

describe('connections come back quickly after Redis does (issue 35)', () => {
  it.each([
    ['the API', () => createFailFastRedis('redis://127.0.0.1:1', 1000, { lazyConnect: true })],
    ['the worker', () => createRedis('redis://127.0.0.1:1', { lazyConnect: true })],
  ])("%s's connection asks again at most 500 ms apart, and every 250 ms while Redis is still loading", (_who, open) => {
    // ioredis's defaults: up to 2 s between reconnections and up to 10 s between loading checks. A full suite's
    // timing test (redis-restart.test.ts) cannot tell 500 ms from 2 s on a loaded machine; these numbers can.
    const redis = open();
    try {
      const retry = redis.options.retryStrategy!;
      expect([1, 5, 10, 100, 10_000].map((times) => retry(times))).toEqual([50, 250, 500, 500, 500]);
      expect(redis.options.maxLoadingRetryTime).toBe(250);
    } finally {
      redis.disconnect();
    }
  });
});
