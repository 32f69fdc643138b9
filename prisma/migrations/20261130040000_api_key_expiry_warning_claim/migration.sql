-- A run that sends an API key's expiry warning first claims it until this time, and sets expiry_warned_at only once
-- the mail went out. Before, the claim was expiry_warned_at itself: a worker killed (or a mail server hanging past the
-- shutdown deadline) between the claim and the mail left the key marked warned, and it expired unannounced.
ALTER TABLE "api_keys" ADD COLUMN "expiry_warning_claimed_until" TIMESTAMP(3);
