-- Security notices (docs/api.md "Security notices"): written in the change's transaction, sent by the API after commit
-- or by the worker's sweep (unsent and due: the (sent_at, next_attempt_at) index), one sender at a time (claimed_until).
-- Purged 30 days after created_at once sent or given up (created_at index), removed with their account.
-- CreateTable
CREATE TABLE "security_notices" (
    "id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "details" JSONB NOT NULL,
    "ip" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL,
    "sent_at" TIMESTAMP(3),
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMP(3),
    "claimed_until" TIMESTAMP(3),

    CONSTRAINT "security_notices_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "security_notices_sent_at_next_attempt_at_idx" ON "security_notices"("sent_at", "next_attempt_at");

-- CreateIndex
CREATE INDEX "security_notices_user_id_idx" ON "security_notices"("user_id");

-- CreateIndex
CREATE INDEX "security_notices_created_at_idx" ON "security_notices"("created_at");

-- AddForeignKey
ALTER TABLE "security_notices" ADD CONSTRAINT "security_notices_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;

