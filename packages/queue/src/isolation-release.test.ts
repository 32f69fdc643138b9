// A success's release sent while its attempt is still being recorded (releaseSuccessIfClosed): it frees the slot only
// while the breaker is closed, where a success moves no breaker; otherwise it changes nothing. Against the real Redis.
import { randomUUID } from 'node:crypto';
import { loadConfig } from '@svc/config';
import { createRedis, IsolationState } from './index';

const config = loadConfig();
const prefix = `test_iso_release_${randomUUID()}`;
const rules = { minInFlight: 1, maxInFlight: 1, slowAttemptMs: 2_000, breakerFailures: 1, breakerOpenMs: 30_000, breakerMaxOpenMs: 600_000 };
const redis = createRedis(config.redis);
const state = new IsolationState(createRedis(config.redis), prefix, rules, 15_000);
afterAll(async () => {
  await state.close();
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

const subscription = () => ({ id: `sub_${randomUUID()}`, rateLimit: null });
const inFlight = (id: string) => redis.zcard(`${prefix}:iso:{${id}}:inflight`);
const breaker = (id: string) => redis.hget(`${prefix}:iso:{${id}}:state`, 'state');

it('frees the slot while the breaker is closed, and gives the slot to the delivery waiting for it', async () => {
  const sub = subscription();
  const now = new Date();
  expect(await state.admit(sub, 'a', now)).toMatchObject({ admitted: true });
  expect(await state.admit(sub, 'b', now)).toMatchObject({ admitted: false, reason: 'in_flight_cap' });
  expect(await state.park(sub.id, 'b', 'in_flight_cap', new Date(now.getTime() + 60_000), now)).toBe(false);
  expect(await state.releaseSuccessIfClosed(sub.id, 'a', 5, now)).toEqual({ transition: null, until: null, wake: ['b'], prober: null });
  expect(await inFlight(sub.id)).toBe(0);
});

it('changes nothing while the breaker is not closed (half-open, its probe in flight): the release after the record closes it', async () => {
  const sub = subscription();
  const now = new Date();
  expect(await state.admit(sub, 'failing', now)).toMatchObject({ admitted: true });
  expect(await state.release(sub.id, 'failing', 'network_error', 5, now)).toMatchObject({ transition: 'open' });
  const later = new Date(now.getTime() + 31_000);
  expect(await state.admit(sub, 'probe', later)).toMatchObject({ admitted: true, transition: 'half_open' });
  expect(await state.releaseSuccessIfClosed(sub.id, 'probe', 5, later)).toBeNull();
  expect(await breaker(sub.id)).toBe('half_open');
  expect(await inFlight(sub.id)).toBe(1);
  expect(await state.release(sub.id, 'probe', 'success', 5, later)).toMatchObject({ transition: 'closed' });
  expect(await breaker(sub.id)).toBe('closed');
  expect(await inFlight(sub.id)).toBe(0);
});
