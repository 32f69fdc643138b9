// CSV for downloads (findings and audit exports).

/**
 * One CSV field. A value a spreadsheet would read as a formula (starting with =, +, -, @, tab or carriage return)
 * is prefixed with a single quote (OWASP "CSV injection"); a field holding a comma, quote or line break is quoted,
 * its quotes doubled (RFC 4180 2.6, 2.7). So is one holding a semicolon: a spreadsheet whose locale separates lists
 * with `;` (most of Europe) would split `a;=1+1` unquoted into a second cell that starts a formula.
 */
export function csvField(value: string | null | undefined): string {
  let text = value ?? '';
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",;\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}
