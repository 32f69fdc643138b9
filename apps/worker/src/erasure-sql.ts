// The SQL of the erasure job, built from the personal-data inventory (@svc/domain personal-data-inventory) only.
// Every statement here selects rows by the request's organization (directly, or through the parent row of a
// child table) and writes only columns the inventory classifies as free text, references or e-mail keyed: a
// column the inventory calls `never` is not reachable from here.
import type { Tx } from '@svc/db';
import { PREVIEW_MASK, previewExcerpt, type FreeTextPass, type TextReplacement } from '@svc/domain';

export const quote = (identifier: string) => `"${identifier.replace(/"/g, '""')}"`;

/** Placeholders of one statement: a value gets its $n when the SQL first uses it (PostgreSQL refuses unused ones). */
class Params {
  readonly values: unknown[] = [];
  private readonly named = new Map<string, string>();
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
  /** The same placeholder for the same name: a text value used many times. */
  text(name: string, value: string): string {
    let ref = this.named.get(name);
    if (!ref) {
      ref = `${this.add(value)}::text`;
      this.named.set(name, ref);
    }
    return ref;
  }
}

/** FROM ... WHERE of a pass's rows in the organization (alias t). */
function scopedFrom(pass: FreeTextPass, p: Params, organizationId: string): string {
  const org = p.add(organizationId);
  if ('organizationColumn' in pass.scope) {
    return `FROM ${quote(pass.table)} t WHERE t.${quote(pass.scope.organizationColumn)} = ${org}`;
  }
  const parent = pass.scope.parent;
  return (
    `FROM ${quote(pass.table)} t JOIN ${quote(parent.table)} parent ON parent.${quote(parent.key)} = t.${quote(parent.foreignKey)} ` +
    `WHERE parent.${quote(parent.organizationColumn)} = ${org}`
  );
}

/** The expression of a column as text, and how a text result goes back into the column. */
function asText(kind: FreeTextPass['columns'][number]['kind'], ref: string) {
  switch (kind) {
    case 'text':
      return { text: ref, match: (re: string) => `coalesce(${ref} ~* ${re}, false)` };
    case 'json':
      return { text: `${ref}::text`, match: (re: string) => `coalesce(${ref}::text ~* ${re}, false)` };
    case 'text_array':
      return { text: `array_to_string(${ref}, chr(10))`, match: (re: string) => `coalesce(array_to_string(${ref}, chr(10)) ~* ${re}, false)` };
  }
}

/** Each replacement applied in turn (e-mail first) to a text expression. */
function replaced(expr: string, replacements: Array<{ pattern: string; replacement: string }>): string {
  return replacements.reduce((inner, r) => `regexp_replace(${inner}, ${r.pattern}, ${r.replacement}, 'gi')`, expr);
}

/** The new value of a column: the replacements applied inside it, keeping its type. */
function rewritten(kind: FreeTextPass['columns'][number]['kind'], ref: string, reps: Array<{ pattern: string; replacement: string }>): string {
  switch (kind) {
    case 'text':
      return replaced(ref, reps);
    case 'json':
      return `(${replaced(`${ref}::text`, reps)})::jsonb`;
    case 'text_array':
      return `ARRAY(SELECT ${replaced('x', reps)} FROM unnest(${ref}) WITH ORDINALITY AS u(x, n) ORDER BY n)`;
  }
}

/** The patterns of one statement as placeholders: per column kind (JSON text escapes what it quotes). */
function patternParams(p: Params, replacements: TextReplacement[], to: (r: TextReplacement) => string) {
  const patternOf = (kind: string, r: TextReplacement) => (kind === 'json' ? r.jsonPattern : r.pattern);
  return {
    reps: (kind: string) =>
      replacements.map((r, i) => ({
        get pattern() {
          return p.text(`${kind === 'json'}:pattern:${i}`, patternOf(kind, r));
        },
        get replacement() {
          return p.text(`replacement:${i}`, to(r));
        },
      })),
    any: (kind: string) => p.text(`${kind === 'json'}:any`, replacements.map((r) => `(?:${patternOf(kind, r)})`).join('|')),
  };
}

export interface BatchResult {
  /** The key of the last row of the batch, or null when the pass is over. */
  lastKey: string | null;
  /** Rows changed per column of the pass. */
  changed: number[];
}

/** One keyset batch of a free-text pass: the next `limit` rows of the organization after `after`, rewritten. */
export async function freeTextBatch(
  tx: Tx,
  pass: FreeTextPass,
  organizationId: string,
  replacements: TextReplacement[],
  after: string | null,
  limit: number,
): Promise<BatchResult> {
  const p = new Params();
  const from = scopedFrom(pass, p, organizationId);
  const pats = patternParams(p, replacements, (r) => r.replacement);
  const key = quote(pass.key);
  const afterParam = p.add(after);
  const limitParam = p.add(limit);
  const matches = pass.columns.map((c, i) => `${asText(c.kind, `t.${quote(c.column)}`).match(pats.any(c.kind))} AS m${i}`);
  const sets = pass.columns.map(
    (c, i) => `${quote(c.column)} = CASE WHEN b.m${i} THEN ${rewritten(c.kind, `u.${quote(c.column)}`, pats.reps(c.kind))} ELSE u.${quote(c.column)} END`,
  );
  const anyMatch = pass.columns.map((_, i) => `b.m${i}`).join(' OR ');
  const counts = pass.columns.map((_, i) => `(SELECT count(*) FROM changed WHERE m${i})::int AS c${i}`);
  const sql = `
    WITH batch AS (
      SELECT t.${key} AS k, ${matches.join(', ')}
      ${from} AND (${afterParam}::text IS NULL OR t.${key} > ${afterParam}::text)
      ORDER BY t.${key} LIMIT ${limitParam}::int
    ), changed AS (
      UPDATE ${quote(pass.table)} u SET ${sets.join(', ')}
      FROM batch b WHERE u.${key} = b.k AND (${anyMatch})
      RETURNING ${pass.columns.map((_, i) => `b.m${i}`).join(', ')}
    )
    SELECT (SELECT max(k) FROM batch) AS last_key, ${counts.join(', ')}`;
  const [row] = await tx.$queryRawUnsafe<Array<Record<string, unknown>>>(sql, ...p.values);
  return { lastKey: (row.last_key as string | null) ?? null, changed: pass.columns.map((_, i) => Number(row[`c${i}`])) };
}

export interface PreviewColumn {
  table: string;
  column: string;
  rows: number;
  samples: Array<{ id: string; excerpt: string }>;
}

const SAMPLES_PER_COLUMN = 3;

/** Rows that would change per column of a pass, with a few masked excerpts. Reads only. */
export async function freeTextPreview(tx: Tx, pass: FreeTextPass, organizationId: string, replacements: TextReplacement[]): Promise<PreviewColumn[]> {
  const p = new Params();
  const from = scopedFrom(pass, p, organizationId);
  const pats = patternParams(p, replacements, (r) => PREVIEW_MASK[r.what]);
  const counts = pass.columns.map((c, i) => `count(*) FILTER (WHERE ${asText(c.kind, `t.${quote(c.column)}`).match(pats.any(c.kind))})::int AS c${i}`);
  const [row] = await tx.$queryRawUnsafe<Array<Record<string, number>>>(`SELECT ${counts.join(', ')} ${from}`, ...p.values);
  const out: PreviewColumn[] = [];
  for (const [i, c] of pass.columns.entries()) {
    const rows = Number(row[`c${i}`]);
    if (rows === 0) continue;
    const sp = new Params();
    const sampleFrom = scopedFrom(pass, sp, organizationId);
    const sampleOf = patternParams(sp, replacements, (r) => PREVIEW_MASK[r.what]);
    const text = asText(c.kind, `t.${quote(c.column)}`);
    const samples = await tx.$queryRawUnsafe<Array<{ id: string; masked: string }>>(
      `SELECT t.${quote(pass.key)} AS id, ${replaced(text.text, sampleOf.reps(c.kind))} AS masked ${sampleFrom} AND ${text.match(sampleOf.any(c.kind))}
       ORDER BY t.${quote(pass.key)} LIMIT ${SAMPLES_PER_COLUMN}`,
      ...sp.values,
    );
    out.push({ table: pass.table, column: c.column, rows, samples: samples.map((s) => ({ id: s.id, excerpt: previewExcerpt(s.masked) })) });
  }
  return out;
}
