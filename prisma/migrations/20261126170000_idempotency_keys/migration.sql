-- Idempotency-Key (issue 37): the stored outcome of a creating POST per organization, credential and key, swept 24 h
-- after created_at by the worker's retention job (index on created_at).
-- CreateTable
CREATE TABLE "idempotency_keys" (
    "organization_id" TEXT NOT NULL,
    "credential" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "request_hash" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "lock_token" TEXT,
    "locked_at" TIMESTAMP(3),
    "response_status" INTEGER,
    "response_body_enc" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("organization_id","credential","key")
);

-- CreateIndex
CREATE INDEX "idempotency_keys_created_at_idx" ON "idempotency_keys"("created_at");

-- AddForeignKey
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

