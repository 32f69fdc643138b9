-- Splunk HEC indexer acknowledgement: an ackId is Splunk's answer on one channel, so a delivery keeps the channel its
-- accepted event POST went on and its polls ask that channel, even after the subscription's splunk_channel changed.
-- Null on rows saved before this column (their polls ask the subscription's channel, as they did).
-- AlterTable
ALTER TABLE "webhook_deliveries" ADD COLUMN     "hec_ack_channel" TEXT;
