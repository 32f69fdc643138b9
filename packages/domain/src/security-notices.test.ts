import {
  renderSecurityNotice,
  SECURITY_NOTICE_GIVE_UP_MS,
  securityNoticeDetails,
  securityNoticeFromStored,
  securityNoticeRetryAt,
  type SecurityNotice,
} from './security-notices';

const context = { name: 'Ada', at: new Date('2026-11-28T08:00:00.000Z'), ip: '203.0.113.7', publicBaseUrl: 'https://svc.example' };

describe('a stored notice', () => {
  it('renders as the notice it was made from, whatever its kind', () => {
    const notices: SecurityNotice[] = [
      { kind: 'password_changed' },
      { kind: 'password_reset' },
      { kind: '2fa_enabled' },
      { kind: '2fa_disabled' },
      { kind: 'api_key_created', key: { name: 'ci', prefix: 'sk-svc-AbCd', expiresAt: new Date('2027-01-01T00:00:00.000Z'), scopeCount: 2 }, organizationName: 'Acme', lastThisHour: true },
      { kind: 'api_key_created', key: { name: 'ci', prefix: 'sk-svc-AbCd', expiresAt: null, scopeCount: 1 }, organizationName: 'Acme', lastThisHour: false },
    ];
    for (const notice of notices) {
      const stored = JSON.parse(JSON.stringify(securityNoticeDetails(notice)));
      const back = securityNoticeFromStored(notice.kind, stored);
      expect(renderSecurityNotice(back!, context)).toEqual(renderSecurityNotice(notice, context));
    }
  });

  it('keeps nothing but the key details for a key, and nothing at all for the other kinds', () => {
    expect(securityNoticeDetails({ kind: 'password_changed' })).toEqual({});
    const key = { kind: 'api_key_created' as const, key: { name: 'ci', prefix: 'sk-svc-AbCd', expiresAt: null, scopeCount: 1 }, organizationName: 'Acme' };
    expect(securityNoticeDetails(key)).toEqual({
      key_name: 'ci', key_prefix: 'sk-svc-AbCd', key_expires_at: null, key_scope_count: 1, organization_name: 'Acme', last_this_hour: false,
    });
  });

  it('an unknown kind or malformed details: not renderable', () => {
    expect(securityNoticeFromStored('email_changed', {})).toBeUndefined();
    expect(securityNoticeFromStored('api_key_created', {})).toBeUndefined();
    expect(securityNoticeFromStored('api_key_created', null)).toBeUndefined();
    expect(
      securityNoticeFromStored('api_key_created', { key_name: 'x', key_prefix: 'p', key_expires_at: 'soon', key_scope_count: 1, organization_name: 'A' }),
    ).toBeUndefined();
  });
});

describe('retries', () => {
  const created = new Date('2026-11-28T08:00:00.000Z');
  const mid = () => 0.5; // no jitter

  it('wait 30 s, 2 min, 8 min, 32 min, then an hour', () => {
    const waits = [1, 2, 3, 4, 5, 6].map((n) => securityNoticeRetryAt(created, n, created, mid)!.getTime() - created.getTime());
    expect(waits).toEqual([30_000, 120_000, 480_000, 1_920_000, 3_600_000, 3_600_000]);
  });

  it('the last try is at 24 h, then it is given up', () => {
    const late = new Date(created.getTime() + SECURITY_NOTICE_GIVE_UP_MS - 60_000);
    expect(securityNoticeRetryAt(created, 20, late, mid)).toEqual(new Date(created.getTime() + SECURITY_NOTICE_GIVE_UP_MS));
    expect(securityNoticeRetryAt(created, 21, new Date(created.getTime() + SECURITY_NOTICE_GIVE_UP_MS), mid)).toBeNull();
  });
});
