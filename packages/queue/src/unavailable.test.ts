import { isRedisUnavailable } from './index';

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
