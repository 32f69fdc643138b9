import {
  idempotentOutcomeIsStored,
  isValidIdempotencyKey,
  judgeTakenKey,
  methodIgnoresIdempotencyKey,
} from './idempotency';

describe('isValidIdempotencyKey', () => {
  it('accepts 1 to 255 printable ASCII characters', () => {
    expect(isValidIdempotencyKey('a')).toBe(true);
    expect(isValidIdempotencyKey('ci-1234 retry ~!')).toBe(true);
    expect(isValidIdempotencyKey('x'.repeat(255))).toBe(true);
  });
  it('refuses empty, longer, control and non-ASCII keys', () => {
    expect(isValidIdempotencyKey('')).toBe(false);
    expect(isValidIdempotencyKey('x'.repeat(256))).toBe(false);
    expect(isValidIdempotencyKey('tab\there')).toBe(false);
    expect(isValidIdempotencyKey('nul\u0000')).toBe(false);
    expect(isValidIdempotencyKey('del\u007f')).toBe(false);
    expect(isValidIdempotencyKey('clé')).toBe(false);
  });
});

it('ignores the key on the methods HTTP defines as idempotent, not on POST or PATCH', () => {
  for (const m of ['GET', 'head', 'OPTIONS', 'PUT', 'delete']) expect(methodIgnoresIdempotencyKey(m)).toBe(true);
  for (const m of ['POST', 'patch']) expect(methodIgnoresIdempotencyKey(m)).toBe(false);
});

it('stores 2xx and 4xx outcomes, not 5xx', () => {
  for (const s of [200, 201, 202, 204, 400, 403, 404, 409, 422]) expect(idempotentOutcomeIsStored(s)).toBe(true);
  for (const s of [401, 429, 500, 502, 503]) expect(idempotentOutcomeIsStored(s)).toBe(false);
  // An answer that asks to be sent again (Retry-After) is not the request's answer.
  expect(idempotentOutcomeIsStored(409, true)).toBe(false);
  expect(idempotentOutcomeIsStored(201, false)).toBe(true);
  expect(idempotentOutcomeIsStored(202, true)).toBe(true);
});

describe('judgeTakenKey', () => {
  it('replays a completed request with the same hash', () => {
    expect(judgeTakenKey({ requestHash: 'h', state: 'completed' }, 'h')).toBe('replay');
  });
  it('answers in_flight while the first request runs', () => {
    expect(judgeTakenKey({ requestHash: 'h', state: 'in_flight' }, 'h')).toBe('in_flight');
  });
  it('refuses a different request whatever the state', () => {
    expect(judgeTakenKey({ requestHash: 'h', state: 'completed' }, 'other')).toBe('different_request');
    expect(judgeTakenKey({ requestHash: 'h', state: 'in_flight' }, 'other')).toBe('different_request');
  });
});
