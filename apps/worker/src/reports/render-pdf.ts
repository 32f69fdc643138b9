// The PDF of an assessment report, drawn with PDFKit (standard fonts, no files to ship): a cover block with the
// assessment and project, the summary counts by severity and by status, then every finding with its severity,
// status, location and description, most severe first.
import { SEVERITIES } from '@svc/domain';
import type PDFKit from 'pdfkit';

// PDFKit (with its font tables, about 11 MiB of a worker's memory) is loaded on the first report, not at start-up:
// most workers only deliver webhooks.
let loading: Promise<typeof PDFKit> | undefined;

function loadPdfKit(): Promise<typeof PDFKit> {
  loading ??= import('pdfkit').then((module) => module.default);
  return loading;
}

export interface ReportFinding {
  id: string;
  title: string;
  severity: string;
  status: string;
  location: string | null;
  description: string | null;
}

export interface ReportDocument {
  reportId: string;
  title: string;
  organizationName: string;
  assessment: { id: string; name: string; status: string; startedAt: Date | null; finishedAt: Date | null };
  project: { id: string; name: string };
  generatedAt: Date;
  findings: ReportFinding[];
}

/**
 * The free text the PDF of `doc` shows, as stored (before pdfText folds it): kept beside the PDF so that an erasure
 * finds the PDFs naming a person however that text has changed since (apps/worker/src/erasure.ts).
 */
export function reportSourceText(doc: ReportDocument): string {
  const parts = [doc.title, doc.project.name, doc.assessment.name];
  for (const f of doc.findings) parts.push(f.title, f.location ?? '', f.description ?? '');
  return parts.join('\n');
}

/** Most severe first. */
export const SEVERITY_ORDER = SEVERITIES;

const SEVERITY_COLOURS: Record<string, string> = {
  critical: '#8b0000',
  high: '#d9480f',
  medium: '#b08900',
  low: '#2b6cb0',
  info: '#4a5568',
};

/**
 * The standard PDF fonts encode WinAnsi (Latin-1) only: accents are folded (é -> e), other characters become '?',
 * and control characters go, so any title or description renders as readable text.
 */
export function pdfText(value: string): string {
  return value
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/\r\n?/g, '\n')
    .replace(/\t/g, '    ')
    .replace(/[^\n\x20-\x7e\xa0-\xff]/g, '?');
}

function severityRank(severity: string): number {
  const rank = (SEVERITY_ORDER as readonly string[]).indexOf(severity);
  return rank === -1 ? SEVERITY_ORDER.length : rank;
}

export function sortFindings(findings: ReportFinding[]): ReportFinding[] {
  return [...findings].sort((a, b) => severityRank(a.severity) - severityRank(b.severity) || a.title.localeCompare(b.title) || a.id.localeCompare(b.id));
}

export function countBy(findings: ReportFinding[], key: 'severity' | 'status'): Map<string, number> {
  const counts = new Map<string, number>();
  for (const f of findings) counts.set(f[key], (counts.get(f[key]) ?? 0) + 1);
  return counts;
}

const day = (d: Date | null) => (d ? d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '-');

export async function renderReportPdf(doc: ReportDocument): Promise<Buffer> {
  const PDFDocument = await loadPdfKit();
  const pdf = new PDFDocument({
    size: 'A4',
    margin: 50,
    bufferPages: true,
    info: {
      Title: pdfText(doc.title),
      Subject: pdfText(`Security assessment report: ${doc.assessment.name}`),
      Author: 'Security Assessment Service',
      Creator: 'Security Assessment Service',
      CreationDate: doc.generatedAt,
    },
  });
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    pdf.on('data', (chunk: Buffer) => chunks.push(chunk));
    pdf.on('end', () => resolve(Buffer.concat(chunks)));
    pdf.on('error', reject);
  });

  const width = pdf.page.width - pdf.page.margins.left - pdf.page.margins.right;
  const left = pdf.page.margins.left;

  // Title block.
  pdf.font('Helvetica-Bold').fontSize(20).fillColor('#111111').text(pdfText(doc.title), { width });
  pdf.moveDown(0.5);
  pdf.font('Helvetica').fontSize(10).fillColor('#333333');
  const facts: Array<[string, string]> = [
    ['Organization', doc.organizationName],
    ['Project', `${doc.project.name} (${doc.project.id})`],
    ['Assessment', `${doc.assessment.name} (${doc.assessment.id})`],
    ['Assessment status', doc.assessment.status],
    ['Started', day(doc.assessment.startedAt)],
    ['Finished', day(doc.assessment.finishedAt)],
    ['Report', doc.reportId],
    ['Generated', day(doc.generatedAt)],
  ];
  for (const [label, value] of facts) {
    pdf.font('Helvetica-Bold').text(`${label}: `, { continued: true }).font('Helvetica').text(pdfText(value));
  }

  // Summary.
  pdf.moveDown(1);
  pdf.font('Helvetica-Bold').fontSize(14).fillColor('#111111').text('Summary');
  pdf.moveDown(0.3);
  pdf.font('Helvetica').fontSize(10).fillColor('#333333').text(`Total findings: ${doc.findings.length}`);
  const bySeverity = countBy(doc.findings, 'severity');
  for (const severity of SEVERITY_ORDER) {
    pdf.fillColor(SEVERITY_COLOURS[severity]).text(`${severity[0].toUpperCase()}${severity.slice(1)}: ${bySeverity.get(severity) ?? 0}`);
  }
  const byStatus = [...countBy(doc.findings, 'status').entries()].sort(([a], [b]) => a.localeCompare(b));
  if (byStatus.length > 0) {
    pdf.fillColor('#333333').text(`By status: ${byStatus.map(([status, n]) => `${status} ${n}`).join(', ')}`);
  }

  // Findings.
  pdf.moveDown(1);
  pdf.font('Helvetica-Bold').fontSize(14).fillColor('#111111').text('Findings');
  if (doc.findings.length === 0) {
    pdf.moveDown(0.3).font('Helvetica').fontSize(10).fillColor('#333333').text('No findings were recorded.');
  }
  sortFindings(doc.findings).forEach((f, index) => {
    pdf.moveDown(0.8);
    if (pdf.y > pdf.page.height - pdf.page.margins.bottom - 80) pdf.addPage();
    pdf.font('Helvetica-Bold').fontSize(11).fillColor('#111111').text(`${index + 1}. ${pdfText(f.title)}`, left, pdf.y, { width });
    pdf.font('Helvetica').fontSize(9);
    pdf.fillColor(SEVERITY_COLOURS[f.severity] ?? '#333333').text(`Severity: ${f.severity}`, { continued: true });
    pdf.fillColor('#333333').text(`    Status: ${f.status}    Id: ${f.id}`);
    pdf.text(`Location: ${f.location ? pdfText(f.location) : '-'}`, { width });
    pdf.moveDown(0.2);
    pdf.fontSize(10).text(f.description ? pdfText(f.description) : 'No description.', { width });
  });

  // Page numbers.
  const range = pdf.bufferedPageRange();
  for (let i = range.start; i < range.start + range.count; i++) {
    pdf.switchToPage(i);
    const bottom = pdf.page.margins.bottom;
    pdf.page.margins.bottom = 0;
    pdf.font('Helvetica').fontSize(8).fillColor('#777777')
      .text(`Page ${i + 1} of ${range.count}`, left, pdf.page.height - 30, { width, align: 'center', lineBreak: false });
    pdf.page.margins.bottom = bottom;
  }
  pdf.end();
  return done;
}
