// What the organization's API-key policy asks of a new key (pure: unit-tested in key-policy.test.ts).

export type KeyPolicy = { enabled?: boolean; require_expiration?: boolean; max_lifetime_days?: number | null; warn_days_before?: number | null; inactivity_days?: number | null };

/** What the organization's key policy asks of a new key's expiry. */
export function keyLimits(policy: KeyPolicy | undefined, today = new Date()): { required: boolean; maxDate?: string; text: string } {
  if (!policy?.enabled) return { required: false, text: '' };
  const max = policy.max_lifetime_days ? new Date(today.getTime() + policy.max_lifetime_days * 86_400_000) : undefined;
  const parts = [
    policy.require_expiration ? 'an expiry is required' : 'an expiry is optional',
    policy.max_lifetime_days ? `keys live at most ${policy.max_lifetime_days} days` : '',
    policy.inactivity_days ? `keys unused for ${policy.inactivity_days} days are revoked` : '',
  ].filter(Boolean);
  return { required: !!policy.require_expiration, maxDate: max?.toISOString().slice(0, 10), text: `Organization key policy: ${parts.join('; ')}.` };
}

