import { REDACTED, redactMetadata } from './redact';

describe('redactMetadata', () => {
  it('drops keys named like credentials, keeps the rest', () => {
    expect(
      redactMetadata({
        name: 'ci',
        secret: 'whsec_x',
        signing_secret: 'x',
        session_token: 't',
        password: 'p',
        authorization: 'Splunk x',
        key: 'k',
        api_key: 'k',
        key_hash: 'h',
        totp: '123456',
        code: '123456',
        secret_enc: 'v1.x',
        grace_period_ends_at: '2026-01-01T00:00:00.000Z',
        previous_secret_expires_at: '2026-01-01T00:00:00.000Z',
        prefix: 'sk-svc-AbCd',
        api_keys_revoked: 2,
        nested: { token: 'x', role: 'admin', list: [{ password: 'p', ok: true }] },
      }),
    ).toEqual({
      name: 'ci',
      grace_period_ends_at: '2026-01-01T00:00:00.000Z',
      previous_secret_expires_at: '2026-01-01T00:00:00.000Z',
      prefix: 'sk-svc-AbCd',
      api_keys_revoked: 2,
      nested: { role: 'admin', list: [{ ok: true }] },
    });
  });

  it('masks values that are credentials whatever their key', () => {
    const apiKey = `sk-svc-${'A'.repeat(43)}abcdef`;
    const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';
    expect(
      redactMetadata({
        note: `leaked ${apiKey} here`,
        webhook: 'whsec_abcdefghijklmnop',
        // A signing secret in standard base64 (Standard Webhooks form) is masked whole, + / = included.
        standard: 'secret whsec_ab+/cdEFgh+/ijKLmn/+opQRst/+uvWXyz01+/234567890ab= end',
        link: 'https://x.example/shared/reports/rshare_abcdefghijklmnopqrstuvwxyz-_0123',
        header: 'Bearer abc.def',
        jwt,
        list: [apiKey],
        when: new Date('2026-01-01T00:00:00Z'),
        missing: undefined,
      }),
    ).toEqual({
      note: `leaked ${REDACTED} here`,
      webhook: REDACTED,
      standard: `secret ${REDACTED} end`,
      link: `https://x.example/shared/reports/${REDACTED}`,
      header: REDACTED,
      jwt: REDACTED,
      list: [REDACTED],
      when: '2026-01-01T00:00:00.000Z',
    });
  });
});
