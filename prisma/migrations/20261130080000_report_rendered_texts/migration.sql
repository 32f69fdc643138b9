-- The free text each stored report PDF was rendered from, so that a GDPR erasure finds the PDFs that name the person
-- in it even when the project, assessment or findings have changed since (prisma/schema.prisma ReportRenderedText).
-- CreateTable
CREATE TABLE "report_rendered_texts" (
    "report_id" TEXT NOT NULL,
    "text" TEXT NOT NULL,

    CONSTRAINT "report_rendered_texts_pkey" PRIMARY KEY ("report_id")
);

-- AddForeignKey
ALTER TABLE "report_rendered_texts" ADD CONSTRAINT "report_rendered_texts_report_id_fkey" FOREIGN KEY ("report_id") REFERENCES "reports"("id") ON DELETE CASCADE ON UPDATE CASCADE;

