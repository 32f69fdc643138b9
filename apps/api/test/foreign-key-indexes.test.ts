// Every foreign key has an index whose leading columns are the key's columns. Without one, deleting a parent row
// (an expired event, an organization, a project) makes PostgreSQL scan the whole child table for the cascade:
// issue 21 found the retention purge deleting 60 events a second because webhook_deliveries.event_id had none.
// Read from the catalogue of the run's migrated database, so a new migration with an unindexed key fails here.
import { Client } from 'pg';

const UNINDEXED_FOREIGN_KEYS = `
  SELECT c.conrelid::regclass::text AS table_name,
         c.conname AS constraint_name,
         array_to_string(ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(attnum, n)
                               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
                               ORDER BY k.n), ',') AS columns
  FROM pg_constraint c
  JOIN pg_namespace ns ON ns.oid = c.connamespace
  WHERE c.contype = 'f'
    AND ns.nspname = current_schema()
    AND NOT EXISTS (
      SELECT 1 FROM pg_index i
      WHERE i.indrelid = c.conrelid
        AND i.indpred IS NULL
        -- the index's first columns are the key's columns (in the key's order; the first one at least)
        AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] = c.conkey
    )
  ORDER BY 1, 2`;

let db: Client;
beforeAll(async () => {
  db = new Client({ connectionString: process.env.DATABASE_URL });
  await db.connect();
});
afterAll(() => db?.end());

it('finds foreign keys in the migrated database (the query reads the right catalogue)', async () => {
  const { rows } = await db.query(
    `SELECT count(*)::int AS n FROM pg_constraint c JOIN pg_namespace ns ON ns.oid = c.connamespace
     WHERE c.contype = 'f' AND ns.nspname = current_schema()`,
  );
  expect(rows[0].n).toBeGreaterThan(40);
});

it('has an index leading with the column(s) of every foreign key', async () => {
  const { rows } = await db.query(UNINDEXED_FOREIGN_KEYS);
  expect(rows.map((r) => `${r.table_name}(${r.columns}) [${r.constraint_name}]`)).toEqual([]);
});

it('reports a foreign key without an index (the check can fail)', async () => {
  await db.query('BEGIN');
  try {
    await db.query('CREATE TABLE fk_index_probe (id text PRIMARY KEY, event_id text NOT NULL REFERENCES events(id))');
    const { rows } = await db.query(UNINDEXED_FOREIGN_KEYS);
    expect(rows.map((r) => `${r.table_name}(${r.columns})`)).toEqual(['fk_index_probe(event_id)']);
    await db.query('CREATE INDEX fk_index_probe_event ON fk_index_probe(event_id)');
    expect((await db.query(UNINDEXED_FOREIGN_KEYS)).rows).toEqual([]);
  } finally {
    await db.query('ROLLBACK');
  }
});
