// The personal-data inventory (packages/domain/src/personal-data-inventory.ts) classifies every text, JSON,
// text-array and byte column of the schema: the erasure job writes only what it classifies, so a column added
// without a class would silently keep a person's data (or, classified wrongly, be rewritten). Read from the
// catalogue of the run's migrated database, so a migration adding a column fails here until the inventory says
// what an erasure does with it.
import { Client } from 'pg';
import { freeTextPasses, inventoryColumns, PERSONAL_DATA_INVENTORY } from '@svc/domain';

const TEXTUAL_COLUMNS = `
  SELECT c.table_name, c.column_name, c.data_type, c.udt_name
  FROM information_schema.columns c
  JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
  WHERE c.table_schema = current_schema()
    AND c.table_name <> '_prisma_migrations'
    AND (c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea')
         OR (c.data_type = 'ARRAY' AND c.udt_name IN ('_text', '_varchar', '_bpchar')))
  ORDER BY 1, 2`;

const kindOf = (r: { data_type: string }) =>
  r.data_type === 'ARRAY' ? 'text_array' : r.data_type === 'json' || r.data_type === 'jsonb' ? 'json' : r.data_type === 'bytea' ? 'bytes' : 'text';

let db: Client;
beforeAll(async () => {
  db = new Client({ connectionString: process.env.DATABASE_URL });
  await db.connect();
});
afterAll(() => db?.end());

async function liveColumns(): Promise<string[]> {
  const { rows } = await db.query(TEXTUAL_COLUMNS);
  return rows.map((r) => `${r.table_name}.${r.column_name}:${kindOf(r)}`);
}

const classified = () => inventoryColumns().map((c) => `${c.table}.${c.column}:${c.kind}`);

it('reads the textual columns of the migrated database (the query reads the right catalogue)', async () => {
  const live = await liveColumns();
  expect(live.length).toBeGreaterThan(150);
  expect(live).toEqual(expect.arrayContaining(['users.password_hash:text', 'events.data:json', 'reports.pdf:bytes', 'api_keys.scopes:text_array']));
});

it('classifies every textual column of the schema, with its kind', async () => {
  const known = new Set(classified());
  expect((await liveColumns()).filter((c) => !known.has(c))).toEqual([]);
});

it('classifies no column the schema does not have (a dropped or renamed column is noticed)', async () => {
  const live = new Set(await liveColumns());
  expect(classified().filter((c) => !live.has(c))).toEqual([]);
});

it('fails on a column added without a class (the check can fail)', async () => {
  await db.query('BEGIN');
  try {
    await db.query('ALTER TABLE findings ADD COLUMN reviewer_note text');
    const known = new Set(classified());
    expect((await liveColumns()).filter((c) => !known.has(c))).toEqual(['findings.reviewer_note:text']);
  } finally {
    await db.query('ROLLBACK');
  }
});

it('never lets credentials, hashes, tokens, sealed values, URLs or organization names be written', () => {
  const writable = inventoryColumns().filter((c) => c.class !== 'never' && c.class !== 'account');
  const forbidden = /(^|_)(hash|enc|token|secret|password|url|key|id|sha256|prefix)$|^organizations\./;
  expect(writable.filter((c) => forbidden.test(c.column) || c.table === 'organizations').map((c) => `${c.table}.${c.column}`)).toEqual([]);
  // Account columns belong to tables without an organization: only the person's own rows, by user id.
  for (const c of inventoryColumns().filter((c) => c.class === 'account')) {
    const table = PERSONAL_DATA_INVENTORY.find((t) => t.table === c.table)!;
    expect([c.table, table.scope]).toEqual([c.table, { account: expect.any(Object) }]);
  }
  // Every free-text pass is scoped to one organization.
  for (const pass of freeTextPasses()) expect(pass.scope).toBeDefined();
});
