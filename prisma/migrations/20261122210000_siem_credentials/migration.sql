-- Sentinel subscriptions: Microsoft Entra ID client credentials (tenant, client id, client secret), sealed as one
-- JSON value. Splunk HEC: the request channel sent as X-Splunk-Request-Channel.
ALTER TABLE "webhook_subscriptions" ADD COLUMN "azure_credentials_enc" TEXT;
ALTER TABLE "webhook_subscriptions" ADD COLUMN "splunk_channel" TEXT;
