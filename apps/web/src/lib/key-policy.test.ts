// Unit tests of the key policy's effect on the API-key form.
import { keyLimits } from './key-policy';

describe('keyLimits', () => {
  const today = new Date('2026-11-22T12:00:00Z');

  it('asks nothing when the policy is off or unknown', () => {
    expect(keyLimits(undefined, today)).toEqual({ required: false, text: '' });
    expect(keyLimits({ enabled: false, require_expiration: true, max_lifetime_days: 5 }, today)).toEqual({ required: false, text: '' });
  });

  it('requires an expiry and caps the date at the maximum lifetime', () => {
    expect(keyLimits({ enabled: true, require_expiration: true, max_lifetime_days: 30, inactivity_days: 90 }, today)).toEqual({
      required: true,
      maxDate: '2026-12-22',
      text: 'Organization key policy: an expiry is required; keys live at most 30 days; keys unused for 90 days are revoked.',
    });
  });

  it('leaves the expiry optional and uncapped when the policy says so', () => {
    expect(keyLimits({ enabled: true, require_expiration: false, max_lifetime_days: null }, today)).toEqual({
      required: false,
      maxDate: undefined,
      text: 'Organization key policy: an expiry is optional.',
    });
  });
});
