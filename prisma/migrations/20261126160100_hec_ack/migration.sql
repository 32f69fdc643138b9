-- Issue 37 part 3: Splunk HEC indexer acknowledgement. A subscription opts in with hec_ack, and a delivery keeps the
-- ackId of its accepted event POST and the time Splunk has to report it indexed by, so a poll survives a restart.
-- AlterTable
ALTER TABLE "webhook_subscriptions" ADD COLUMN     "hec_ack" BOOLEAN NOT NULL DEFAULT false;

-- AlterTable
ALTER TABLE "webhook_deliveries" ADD COLUMN     "hec_ack_id" BIGINT,
ADD COLUMN     "hec_ack_deadline" TIMESTAMP(3);
