import { createHmac } from 'node:crypto';
import Stripe from 'stripe';
import { allSampleEnvelopes, NASTY_STRINGS, sampleEnvelope } from './__tests__/fixtures';
import { PAYLOAD_FORMATS } from './events';
import { renderPayload } from './render';
import {
  buildSignatureHeader,
  generateSigningSecret,
  isValidSignature,
  parseSignatureHeader,
  signPayload,
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
  it('is whsec_ + 32 random bytes in base64url', () => {
    const secrets = new Set<string>();
    for (let i = 0; i < 20; i += 1) {
      const secret = generateSigningSecret();
      expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(secret.slice(6), 'base64url')).toHaveLength(32);
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
