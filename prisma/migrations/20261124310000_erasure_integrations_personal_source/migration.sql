-- CreateTable
CREATE TABLE "erasure_requests" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "subject_user_id" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "pseudonym_name" TEXT NOT NULL,
    "pseudonym_email" TEXT NOT NULL,
    "requested_by_id" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "error" TEXT,
    "receipt" JSONB,
    "completed_at" TIMESTAMP(3),
    "cancelled_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "erasure_requests_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "integrations" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "auth_method" TEXT NOT NULL,
    "credential_enc" TEXT,
    "credential_hint" TEXT,
    "installation_id" TEXT,
    "base_url" TEXT,
    "workspace_id" TEXT,
    "status" TEXT NOT NULL DEFAULT 'connected',
    "created_by_id" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "integrations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "team_integrations" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "team_id" TEXT NOT NULL,
    "integration_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "team_integrations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "personal_source_connections" (
    "id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "login" TEXT NOT NULL,
    "scopes" TEXT[],
    "token_enc" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "personal_source_connections_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "erasure_requests_organization_id_subject_user_id_idx" ON "erasure_requests"("organization_id", "subject_user_id");

-- CreateIndex
CREATE INDEX "erasure_requests_status_created_at_idx" ON "erasure_requests"("status", "created_at");

-- CreateIndex
CREATE INDEX "integrations_organization_id_kind_idx" ON "integrations"("organization_id", "kind");

-- CreateIndex
CREATE INDEX "team_integrations_integration_id_idx" ON "team_integrations"("integration_id");

-- CreateIndex
CREATE UNIQUE INDEX "team_integrations_team_id_kind_key" ON "team_integrations"("team_id", "kind");

-- CreateIndex
CREATE UNIQUE INDEX "personal_source_connections_user_id_provider_key" ON "personal_source_connections"("user_id", "provider");

-- AddForeignKey
ALTER TABLE "erasure_requests" ADD CONSTRAINT "erasure_requests_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "integrations" ADD CONSTRAINT "integrations_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "team_integrations" ADD CONSTRAINT "team_integrations_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "team_integrations" ADD CONSTRAINT "team_integrations_team_id_fkey" FOREIGN KEY ("team_id") REFERENCES "teams"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "team_integrations" ADD CONSTRAINT "team_integrations_integration_id_fkey" FOREIGN KEY ("integration_id") REFERENCES "integrations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "personal_source_connections" ADD CONSTRAINT "personal_source_connections_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;

