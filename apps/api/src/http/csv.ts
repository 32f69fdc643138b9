// CSV for downloads (findings and audit exports).

/**
 * One CSV field. A value a spreadsheet would read as a formula (starting with =, +, -, @, tab or carriage return)
 * is prefixed with a single quote (OWASP "CSV injection"); a field holding a comma, quote or line break is quoted,
 * its quotes doubled (RFC 4180 2.6, 2.7). A spreadsheet whose locale separates lists with `;` (most of Europe) reads
 * a comma-separated file as one cell per `;`, and one row per line break, wherever they stand (quotes count only at
 * a cell's start): so inside the value too, a formula character after `;`, a tab or a line break gets the single
 * quote, and such a field is quoted.
 */
export function csvField(value: string | null | undefined): string {
  let text = (value ?? '').replace(/([;\t\r\n])(?=[=+\-@\t\r])/g, "$1'");
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",;\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}
