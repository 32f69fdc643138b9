import { createHmac } from 'node:crypto';
import Stripe from 'stripe';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { allSampleEnvelopes, NASTY_STRINGS, sampleEnvelope } from './__tests__/fixtures';
import { PAYLOAD_FORMATS } from './events';
import { renderPayload } from './render';
import {
  buildSignatureHeader,
  buildStandardWebhookSignature,
  generateSigningSecret,
  isSignatureScheme,
  isValidSignature,
  parseSignatureHeader,
  signPayload,
  signStandardWebhook,
  standardWebhookHeaders,
  standardWebhooksKey,
  standardWebhooksSecret,
  verifySignature,
} from './signing';

// The independent receiver: the stripe package's verifier (it needs no network and no real API key).
const stripe = new Stripe('sk_test_x');
const stripeSignature = (() => {
  const signature = stripe.webhooks.signature;
  if (!signature) throw new Error('stripe.webhooks.signature is missing');
  return signature;
})();

function stripeAccepts(body: Buffer | string, header: string, secret: string, receivedAtMs?: number): boolean {
  try {
    return stripeSignature.verifyHeader(body, header, secret, 300, undefined, receivedAtMs);
  } catch {
    return false;
  }
}

const NEW_SECRET = 'whsec_newSecretValue_0123456789abcdefghijklmnop';
const OLD_SECRET = 'whsec_oldSecretValue_ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const T = 1_793_614_530; // 2026-11-02T10:15:30Z
const NOW = T * 1000;

function tamper(body: Buffer): Buffer {
  const copy = Buffer.from(body);
  copy[Math.floor(copy.length / 2)] ^= 0x01;
  return copy;
}

describe('signPayload', () => {
  it('is the lowercase hex HMAC-SHA256 of "<t>.<body>"', () => {
    const expected = createHmac('sha256', 'whsec_k').update('1700000000.{"a":1}').digest('hex');
    expect(signPayload('{"a":1}', 1700000000, 'whsec_k')).toBe(expected);
    expect(signPayload(Buffer.from('{"a":1}'), 1700000000, 'whsec_k')).toBe(expected);
    expect(signPayload(new Uint8Array(Buffer.from('{"a":1}')), 1700000000, 'whsec_k')).toBe(expected);
    expect(expected).toMatch(/^[0-9a-f]{64}$/);
  });

  it('signs the exact bytes (non-UTF-8 bytes included)', () => {
    const bytes = Buffer.from([0xff, 0x00, 0xfe]);
    const expected = createHmac('sha256', 's').update(Buffer.concat([Buffer.from('5.'), bytes])).digest('hex');
    expect(signPayload(bytes, 5, 's')).toBe(expected);
  });

  it('refuses a bad timestamp or secret', () => {
    expect(() => signPayload('x', 1.5, 's')).toThrow(RangeError);
    expect(() => signPayload('x', -1, 's')).toThrow(RangeError);
    expect(() => signPayload('x', 1, '')).toThrow(TypeError);
  });
});

describe('buildSignatureHeader', () => {
  it('is exactly t=<unix>,v1=<hex> with no spaces', () => {
    const header = buildSignatureHeader('body', T, [NEW_SECRET]);
    expect(header).toBe(`t=${T},v1=${signPayload('body', T, NEW_SECRET)}`);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
  });

  it('carries the new secret first, then the previous one', () => {
    const header = buildSignatureHeader('body', T, [NEW_SECRET, OLD_SECRET]);
    expect(header).toBe(`t=${T},v1=${signPayload('body', T, NEW_SECRET)},v1=${signPayload('body', T, OLD_SECRET)}`);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
  });

  it('signs a repeated secret once and refuses an empty list', () => {
    expect(buildSignatureHeader('b', T, [NEW_SECRET, NEW_SECRET])).toBe(buildSignatureHeader('b', T, [NEW_SECRET]));
    expect(() => buildSignatureHeader('b', T, [])).toThrow(TypeError);
  });
});

describe('generateSigningSecret', () => {
  it('is whsec_ + 32 random bytes in standard base64 with padding, the key the Standard Webhooks library reads', () => {
    const secrets = new Set<string>();
    for (let i = 0; i < 20; i += 1) {
      const secret = generateSigningSecret();
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      const key = Buffer.from(secret.slice(6), 'base64');
      expect(key).toHaveLength(32);
      expect(Buffer.from((new StandardWebhook(secret) as unknown as { key: Uint8Array }).key).equals(key)).toBe(true);
      expect(standardWebhooksKey(secret).equals(key)).toBe(true);
      secrets.add(secret);
    }
    expect(secrets.size).toBe(20);
  });
});

describe.each(PAYLOAD_FORMATS)('signature of a %s delivery', (format) => {
  const envelopes = [...allSampleEnvelopes(), sampleEnvelope('finding.created', { title: NASTY_STRINGS.join(' ') })];

  it('is accepted by the stripe verifier and by verifySignature, for every event type', () => {
    const now = Math.floor(Date.now() / 1000);
    for (const envelope of envelopes) {
      const { body } = renderPayload(format, envelope);
      const header = buildSignatureHeader(body, now, [NEW_SECRET]);
      expect(stripeAccepts(body, header, NEW_SECRET)).toBe(true);
      expect(stripeAccepts(body.toString('utf8'), header, NEW_SECRET)).toBe(true);
      expect(verifySignature(body, header, NEW_SECRET)).toEqual({ ok: true, timestamp: now });
      expect(stripeAccepts(body, header, OLD_SECRET)).toBe(false);
      expect(verifySignature(body, header, OLD_SECRET)).toEqual({ ok: false, reason: 'signature_mismatch' });
    }
  });

  it('with two secrets (rotation window) verifies under each secret alone', () => {
    const now = Math.floor(Date.now() / 1000);
    const { body } = renderPayload(format, envelopes[1]);
    const header = buildSignatureHeader(body, now, [NEW_SECRET, OLD_SECRET]);
    expect(stripeAccepts(body, header, NEW_SECRET)).toBe(true);
    expect(stripeAccepts(body, header, OLD_SECRET)).toBe(true);
    expect(stripeAccepts(body, header, 'whsec_other')).toBe(false);
    expect(verifySignature(body, header, NEW_SECRET).ok).toBe(true);
    expect(verifySignature(body, header, OLD_SECRET).ok).toBe(true);
    expect(verifySignature(body, header, [OLD_SECRET, NEW_SECRET]).ok).toBe(true);
    expect(verifySignature(body, header, 'whsec_other')).toEqual({ ok: false, reason: 'signature_mismatch' });
  });

  it('fails for a tampered body, in stripe and in verifySignature', () => {
    const now = Math.floor(Date.now() / 1000);
    const { body } = renderPayload(format, envelopes[1]);
    const header = buildSignatureHeader(body, now, [NEW_SECRET, OLD_SECRET]);
    const tampered = tamper(body);
    expect(stripeAccepts(tampered, header, NEW_SECRET)).toBe(false);
    expect(stripeAccepts(tampered, header, OLD_SECRET)).toBe(false);
    expect(verifySignature(tampered, header, [NEW_SECRET, OLD_SECRET])).toEqual({ ok: false, reason: 'signature_mismatch' });
    const appended = Buffer.concat([body, Buffer.from(' ')]);
    expect(stripeAccepts(appended, header, NEW_SECRET)).toBe(false);
    expect(verifySignature(appended, header, NEW_SECRET).ok).toBe(false);
  });

  it('fails when the timestamp in the header is changed', () => {
    const now = Math.floor(Date.now() / 1000);
    const { body } = renderPayload(format, envelopes[0]);
    const header = buildSignatureHeader(body, now, [NEW_SECRET]).replace(`t=${now}`, `t=${now - 1}`);
    expect(stripeAccepts(body, header, NEW_SECRET)).toBe(false);
    expect(verifySignature(body, header, NEW_SECRET)).toEqual({ ok: false, reason: 'signature_mismatch' });
  });
});

describe('verifySignature tolerance (injected now)', () => {
  const body = Buffer.from('{"a":1}');
  const header = buildSignatureHeader(body, T, [NEW_SECRET]);

  it.each([
    ['exactly at t', NOW, true],
    ['300 s later', NOW + 300_000, true],
    ['300 s earlier (clock skew)', NOW - 300_000, true],
    ['300.001 s later', NOW + 300_001, false],
    ['300.001 s earlier', NOW - 300_001, false],
    ['301 s later', NOW + 301_000, false],
    ['an hour later', NOW + 3_600_000, false],
  ])('%s -> %p', (_label, now, ok) => {
    const result = verifySignature(body, header, NEW_SECRET, { now });
    expect(result.ok).toBe(ok);
    if (!ok) expect(result).toEqual({ ok: false, reason: 'timestamp_out_of_tolerance' });
  });

  it('honours a custom tolerance', () => {
    expect(verifySignature(body, header, NEW_SECRET, { now: NOW + 10_000, toleranceSeconds: 10 }).ok).toBe(true);
    expect(verifySignature(body, header, NEW_SECRET, { now: NOW + 10_001, toleranceSeconds: 10 }).ok).toBe(false);
    expect(verifySignature(body, header, NEW_SECRET, { now: NOW, toleranceSeconds: 0 }).ok).toBe(true);
    expect(verifySignature(body, header, NEW_SECRET, { now: NOW + 1, toleranceSeconds: 0 }).ok).toBe(false);
  });

  it('agrees with stripe at the past boundary (stripe checks age only, in whole seconds)', () => {
    expect(stripeAccepts(body, header, NEW_SECRET, NOW + 300_000)).toBe(true);
    expect(stripeAccepts(body, header, NEW_SECRET, NOW + 301_000)).toBe(false);
    expect(verifySignature(body, header, NEW_SECRET, { now: NOW + 300_000 }).ok).toBe(true);
    expect(verifySignature(body, header, NEW_SECRET, { now: NOW + 301_000 }).ok).toBe(false);
  });

  it('checks the timestamp before the signature', () => {
    expect(verifySignature(tamper(body), header, NEW_SECRET, { now: NOW + 400_000 })).toEqual({
      ok: false,
      reason: 'timestamp_out_of_tolerance',
    });
  });

  it('defaults now to Date.now()', () => {
    const old = buildSignatureHeader(body, 1_000_000_000, [NEW_SECRET]); // 2001
    expect(verifySignature(body, old, NEW_SECRET)).toEqual({ ok: false, reason: 'timestamp_out_of_tolerance' });
    const fresh = buildSignatureHeader(body, Math.floor(Date.now() / 1000), [NEW_SECRET]);
    expect(verifySignature(body, fresh, NEW_SECRET).ok).toBe(true);
  });
});

describe('verifySignature header parsing', () => {
  const body = 'payload';
  const sig = signPayload(body, T, NEW_SECRET);
  const check = (header: unknown) => verifySignature(body, header as string, NEW_SECRET, { now: NOW });

  it.each([
    ['missing header', undefined, 'malformed_header'],
    ['null header', null, 'malformed_header'],
    ['empty header', '', 'malformed_header'],
    ['garbage', 'garbage', 'malformed_header'],
    ['no t=', `v1=${sig}`, 'malformed_header'],
    ['non-numeric t', `t=abc,v1=${sig}`, 'malformed_header'],
    ['negative t', `t=-5,v1=${sig}`, 'malformed_header'],
    ['two t=', `t=${T},t=${T},v1=${sig}`, 'malformed_header'],
    ['no v1=', `t=${T}`, 'no_signature'],
    ['only other schemes', `t=${T},v0=${sig}`, 'no_signature'],
    ['empty v1', `t=${T},v1=`, 'no_signature'],
    ['uppercase hex', `t=${T},v1=${sig.toUpperCase()}`, 'signature_mismatch'],
    ['short signature', `t=${T},v1=${sig.slice(0, 10)}`, 'signature_mismatch'],
    ['long signature', `t=${T},v1=${sig}00`, 'signature_mismatch'],
  ])('%s -> %s', (_label, header, reason) => {
    expect(check(header)).toEqual({ ok: false, reason });
  });

  it('accepts any matching v1 among several, in any order, and ignores other schemes', () => {
    expect(check(`t=${T},v1=${'0'.repeat(64)},v1=${sig}`).ok).toBe(true);
    expect(check(`v1=${sig},t=${T}`).ok).toBe(true);
    expect(check(`t=${T},v0=abc,v1=${sig}`).ok).toBe(true);
    expect(check(` t=${T} , v1=${sig} `).ok).toBe(true);
  });

  it('parses the header into its parts', () => {
    expect(parseSignatureHeader(`t=${T},v1=aa,v1=bb`)).toEqual({ ok: true, value: { timestamp: T, signatures: ['aa', 'bb'] } });
  });

  it('has a boolean helper', () => {
    expect(isValidSignature(body, `t=${T},v1=${sig}`, NEW_SECRET, { now: NOW })).toBe(true);
    expect(isValidSignature(body, `t=${T},v1=${sig}`, OLD_SECRET, { now: NOW })).toBe(false);
  });

  it('refuses to verify without a secret', () => {
    expect(() => verifySignature(body, `t=${T},v1=${sig}`, [], { now: NOW })).toThrow(TypeError);
    expect(() => verifySignature(body, `t=${T},v1=${sig}`, '', { now: NOW })).toThrow(TypeError);
  });
});

// The Standard Webhooks scheme, checked by the reference verifier (the `standardwebhooks` package), which reads the
// clock itself: each check runs with Date.now() at the signature's time plus `ageSeconds`.
describe('Standard Webhooks signatures', () => {
  const ID = 'whdel_01JDEXAMPLE0000000000000';
  const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const ROTATED = generateSigningSecret();

  function referenceAccepts(body: Buffer | string, headers: Record<string, string>, secret: string, ageSeconds = 0): boolean {
    const clock = jest.spyOn(Date, 'now').mockReturnValue((Number(headers['webhook-timestamp']) + ageSeconds) * 1000);
    try {
      // jsonParse off: CEF bodies and the plain strings here are not JSON.
      new StandardWebhook(secret).verify(body, headers, { jsonParse: false });
      return true;
    } catch {
      return false;
    } finally {
      clock.mockRestore();
    }
  }

  it('signs base64 HMAC-SHA256 of "<id>.<t>.<body>" keyed with the decoded secret', () => {
    const key = Buffer.from('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'base64');
    const expected = createHmac('sha256', key).update(`${ID}.${T}.{"a":1}`).digest('base64');
    expect(signStandardWebhook(ID, T, '{"a":1}', SECRET)).toBe(expected);
    expect(signStandardWebhook(ID, T, Buffer.from('{"a":1}'), SECRET)).toBe(expected);
    // The same value the reference library computes for the same message.
    expect(new StandardWebhook(SECRET).sign(ID, new Date(T * 1000), '{"a":1}')).toBe(`v1,${expected}`);
  });

  it('is not SPEC\'s signature: the key is the decoded bytes, not the whsec_ string', () => {
    expect(signStandardWebhook(ID, T, 'b', SECRET)).not.toBe(createHmac('sha256', SECRET).update(`${ID}.${T}.b`).digest('base64'));
  });

  it.each(allSampleEnvelopes().map((e) => [e.type, e] as const))('is accepted by the reference verifier for a %s service body', (_type, envelope) => {
    for (const format of PAYLOAD_FORMATS) {
      const { body } = renderPayload(format, envelope, { splunkIndex: 'main' });
      const headers = standardWebhookHeaders(ID, T, body, [ROTATED]);
      expect(referenceAccepts(body, headers, ROTATED)).toBe(true);
    }
  });

  it('has the header shapes: webhook-id, webhook-timestamp in Unix seconds, webhook-signature "v1,<base64>"', () => {
    const headers = standardWebhookHeaders(ID, T, 'body', [SECRET]);
    expect(headers).toEqual({ 'webhook-id': ID, 'webhook-timestamp': String(T), 'webhook-signature': `v1,${signStandardWebhook(ID, T, 'body', SECRET)}` });
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  });

  it('carries both signatures, space-separated and new first, during a rotation: each secret alone verifies', () => {
    const headers = standardWebhookHeaders(ID, T, 'body', [ROTATED, SECRET]);
    const parts = headers['webhook-signature'].split(' ');
    expect(parts).toEqual([`v1,${signStandardWebhook(ID, T, 'body', ROTATED)}`, `v1,${signStandardWebhook(ID, T, 'body', SECRET)}`]);
    expect(referenceAccepts('body', headers, ROTATED)).toBe(true);
    expect(referenceAccepts('body', headers, SECRET)).toBe(true);
    expect(referenceAccepts('body', headers, generateSigningSecret())).toBe(false);
    // After the window only the new one is sent: the previous secret no longer verifies.
    const after = standardWebhookHeaders(ID, T, 'body', [ROTATED]);
    expect(referenceAccepts('body', after, ROTATED)).toBe(true);
    expect(referenceAccepts('body', after, SECRET)).toBe(false);
  });

  it('signs secrets with the same key bytes once', () => {
    const legacy = 'whsec_' + Buffer.from(standardWebhooksKey(ROTATED)).toString('base64url');
    expect(buildStandardWebhookSignature(ID, T, 'b', [ROTATED, legacy])).toBe(buildStandardWebhookSignature(ID, T, 'b', [ROTATED]));
  });

  it('fails in the reference verifier for a changed body, id, timestamp, or a stale message', () => {
    const body = Buffer.from('{"type":"finding.created"}');
    const headers = standardWebhookHeaders(ID, T, body, [SECRET]);
    expect(referenceAccepts(body, headers, SECRET)).toBe(true);
    expect(referenceAccepts(tamper(body), headers, SECRET)).toBe(false);
    expect(referenceAccepts(body, { ...headers, 'webhook-id': `${ID}x` }, SECRET)).toBe(false);
    expect(referenceAccepts(body, { ...headers, 'webhook-timestamp': String(T + 1) }, SECRET)).toBe(false);
    expect(referenceAccepts(body, headers, SECRET, 301)).toBe(false);
    expect(referenceAccepts(body, headers, SECRET, 299)).toBe(true);
  });

  it('signs UTF-8 bodies with non-ASCII text as the bytes sent', () => {
    for (const text of NASTY_STRINGS) {
      const body = JSON.stringify({ title: text });
      const headers = standardWebhookHeaders(ID, T, Buffer.from(body, 'utf8'), [SECRET]);
      expect(referenceAccepts(body, headers, SECRET)).toBe(true);
    }
  });

  it('reads older base64url secrets too, and re-encodes them into the form the reference library takes', () => {
    const key = Buffer.from('fb-_'.repeat(8), 'base64url');
    const legacy = `whsec_${key.toString('base64url')}`;
    expect(legacy).toMatch(/[-_]/);
    expect(() => new StandardWebhook(legacy)).toThrow();
    expect(standardWebhooksKey(legacy).equals(key)).toBe(true);
    const converted = standardWebhooksSecret(legacy);
    expect(converted).toBe(`whsec_${key.toString('base64')}`);
    expect(standardWebhooksSecret(converted)).toBe(converted);
    const headers = standardWebhookHeaders(ID, T, 'x', [legacy]);
    expect(referenceAccepts('x', headers, converted)).toBe(true);
  });

  it('refuses a secret that is not base64, an empty one, a bad id or timestamp, and no secrets', () => {
    expect(() => standardWebhooksKey('whsec_not base64!')).toThrow(TypeError);
    expect(() => standardWebhooksKey('whsec_')).toThrow(TypeError);
    expect(() => standardWebhooksKey('')).toThrow(TypeError);
    expect(() => signStandardWebhook('', T, 'b', SECRET)).toThrow(TypeError);
    expect(() => signStandardWebhook('a b', T, 'b', SECRET)).toThrow(TypeError);
    expect(() => signStandardWebhook('a\nb', T, 'b', SECRET)).toThrow(TypeError);
    expect(() => signStandardWebhook(ID, -1, 'b', SECRET)).toThrow(RangeError);
    expect(() => signStandardWebhook(ID, 1.5, 'b', SECRET)).toThrow(RangeError);
    expect(() => buildStandardWebhookSignature(ID, T, 'b', [])).toThrow(TypeError);
  });

  it('names the two schemes', () => {
    expect(isSignatureScheme('service')).toBe(true);
    expect(isSignatureScheme('standard_webhooks')).toBe(true);
    expect(isSignatureScheme('svix')).toBe(false);
    expect(isSignatureScheme(undefined)).toBe(false);
  });
});
