-- Splunk HEC indexer acknowledgement: an ackId is Splunk's answer on one channel of one host, so a delivery keeps the
-- channel its accepted event POST went on and the destination (scheme://host:port) it went to: its polls ask that
-- channel, and only while the subscription's URL is still on that destination (a move ends the awaited ack).
-- Null on rows saved before these columns (their polls ask the subscription's channel and URL, as they did).
-- AlterTable
ALTER TABLE "webhook_deliveries" ADD COLUMN     "hec_ack_channel" TEXT,
ADD COLUMN     "hec_ack_destination" TEXT;
