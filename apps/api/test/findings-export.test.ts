// GET /findings/export: SARIF 2.1.0 validated with ajv against the official OASIS schema, JSON, and CSV read
// back with an independent RFC 4180 parser (csv-parse), including formula-injection neutralisation.
//
// fixtures/sarif-2.1.0.json is the finalized SARIF 2.1.0 JSON schema as Microsoft's SARIF SDK ships it (JSON
// Schema draft 2020-12), taken unchanged from the npm package @microsoft/sarif-multitool-linux@5.7.0
// (package/sarif-2.1.0.json; `npm pack @microsoft/sarif-multitool-linux@5.7.0` to check). Its SHA-256 is pinned
// below. It is vendored rather than installed because that package is a 43 MB .NET tool.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { parse } from 'csv-parse/sync';
import request from 'supertest';
import { csvField } from '../src/http/csv';
import { renderSarif, sarifLocation } from '../src/modules/findings/findings.export';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { createKey, insertAssessmentIn, insertFinding } from './support/domain';

const SCHEMA_PATH = path.join(__dirname, 'fixtures/sarif-2.1.0.json');
const SCHEMA_SHA256 = '1c49a0f2b60444c71bb14878e21e0d882198eff4c539861b133093ad89ed798c';

function sarifValidator() {
  const schema = JSON.parse(readFileSync(SCHEMA_PATH, 'utf8'));
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  addFormats(ajv);
  return ajv.compile(schema);
}

let h: Harness;
let org: TestOrg;
let other: TestOrg;
let assessment: { id: string; organizationId: string; projectId: string };
const validate = sarifValidator();

const TRICKY = [
  { title: '=HYPERLINK("http://evil.example","click")', severity: 'critical', status: 'open', location: 'src/app.ts:42:7', description: 'line one\nline "two", with comma' },
  { title: '+1+1', severity: 'high', status: 'confirmed', location: 'https://app.example.com/login?next=/a b', description: '-2+3' },
  { title: '@SUM(A1:A2)', severity: 'medium', status: 'dismissed', location: 'POST /api/orders', description: null },
  { title: '-10', severity: 'low', status: 'fixed', location: 'C:\\repo\\src\\x [1].cs:9', description: '\tindented' },
  { title: 'Plain, with comma', severity: 'info', status: 'suppressed', location: null, description: '\rcarriage' },
  { title: 'Ünïcødé ✓ {braces} <tags> |pipes| `ticks`', severity: 'high', status: 'accepted_risk', location: 'lib/{weird}<path>|x^.js', description: 'ok' },
  { title: 'Regressed', severity: 'critical', status: 'regressed', location: 'src/a.ts:0', description: 'line 0 is no line' },
];

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
  const project = await insertProject(h, org.id);
  assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
  for (const [i, f] of TRICKY.entries()) await insertFinding(h, assessment, { ...f, fingerprint: `fp-${i}` });
});
afterAll(() => h.close());

const exportAs = (format: string, query = '', token = org.admin.token) =>
  request(h.app).get(`/api/v1/findings/export?format=${format}&assessment_id=${assessment.id}${query}`).set(bearer(token));

describe('the SARIF schema fixture', () => {
  it('is the pinned OASIS SARIF 2.1.0 schema, and the validator rejects invalid logs', () => {
    const bytes = readFileSync(SCHEMA_PATH);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(SCHEMA_SHA256);
    const schema = JSON.parse(bytes.toString('utf8'));
    expect(schema.title).toBe('Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema');
    expect(Object.keys(schema.definitions.suppression.properties)).toContain('status');
    expect(validate({ version: '2.1.0', runs: [] })).toBe(true);
    expect(validate({ version: '2.0.0', runs: [] })).toBe(false);
    expect(validate({ version: '2.1.0', runs: [{ tool: { driver: {} } }] })).toBe(false); // driver.name required
    expect(validate({ version: '2.1.0', runs: [{ tool: { driver: { name: 'x' } }, results: [{ message: { text: 'm' }, level: 'fatal' }] }] })).toBe(false);
    expect(validate({ version: '2.1.0', runs: [{ tool: { driver: { name: 'x' } }, results: [{ message: { text: 'm' }, locations: [{ physicalLocation: { artifactLocation: { uri: 'a b' } } }] }] }] })).toBe(false);
    expect(validate({ version: '2.1.0', runs: [{ tool: { driver: { name: 'x' } }, results: [{ message: { text: 'm' }, suppressions: [{ kind: 'external', state: 'accepted' }] }] }] })).toBe(false);
  });
});

describe('SARIF', () => {
  it('validates against the SARIF 2.1.0 schema and carries every finding', async () => {
    const res = await exportAs('sarif');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/sarif\+json/);
    expect(res.headers['content-disposition']).toMatch(/^attachment; filename="findings-\d{4}-\d{2}-\d{2}\.sarif"$/);
    const log = JSON.parse(res.text);
    const valid = validate(log);
    expect(validate.errors ?? []).toEqual([]);
    expect(valid).toBe(true);

    const run = log.runs[0];
    expect(run.tool.driver.name).toBe('Security Assessment Service');
    expect(run.results).toHaveLength(TRICKY.length);
    expect(run.tool.driver.rules).toHaveLength(TRICKY.length);
    const byFp = new Map(run.results.map((r: { ruleId: string }) => [r.ruleId, r]));
    expect(byFp.get('fp-0')).toMatchObject({
      level: 'error',
      kind: 'fail',
      message: { text: expect.stringContaining('=HYPERLINK') },
      locations: [{ physicalLocation: { artifactLocation: { uri: 'src/app.ts' }, region: { startLine: 42, startColumn: 7 } } }],
      partialFingerprints: { 'findingFingerprint/v1': 'fp-0' },
      properties: { severity: 'critical', status: 'open', assessment_id: assessment.id },
    });
    expect(byFp.get('fp-2')).toMatchObject({
      level: 'warning',
      locations: [{ logicalLocations: [{ fullyQualifiedName: 'POST /api/orders' }] }],
      suppressions: [{ kind: 'external', status: 'accepted' }],
    });
    expect(byFp.get('fp-3')).toMatchObject({ kind: 'pass', level: 'none' });
    expect(byFp.get('fp-4')).not.toHaveProperty('locations');
    expect(run.tool.driver.rules[0].properties['security-severity']).toBe('9.5');
  });

  it('renders valid SARIF for no findings and for odd locations', () => {
    expect(validate(renderSarif([]))).toBe(true);
    expect(sarifLocation('src/a.ts:0')).toEqual({ physicalLocation: { artifactLocation: { uri: 'src/a.ts:0' } } });
    expect(sarifLocation('https://h.example:8443')).toEqual({ physicalLocation: { artifactLocation: { uri: 'https://h.example:8443' } } });
    expect(sarifLocation('%41')).toEqual({ physicalLocation: { artifactLocation: { uri: '%2541' } } });
  });
});

describe('JSON', () => {
  it('holds the findings exactly as GET /findings presents them', async () => {
    const res = await exportAs('json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = JSON.parse(res.text);
    expect(body.count).toBe(TRICKY.length);
    const list = await request(h.app).get(`/api/v1/findings?assessment_id=${assessment.id}&limit=100`).set(bearer(org.admin.token));
    const byId = (xs: Array<{ id: string }>) => [...xs].sort((a, b) => a.id.localeCompare(b.id));
    expect(byId(body.data)).toEqual(byId(list.body.data));
  });
});

describe('CSV', () => {
  it('is RFC 4180 CSV with a header, quoting where needed and formula cells neutralised', async () => {
    const res = await exportAs('csv');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv; charset=utf-8/);
    expect(res.headers['content-disposition']).toMatch(/filename="findings-.*\.csv"/);
    expect(res.text.endsWith('\r\n')).toBe(true);
    const records: Array<Record<string, string>> = parse(res.text, { columns: true, relax_quotes: false, record_delimiter: '\r\n' });
    expect(records).toHaveLength(TRICKY.length);
    const byFp = new Map(records.map((r) => [r.fingerprint, r]));
    expect(byFp.get('fp-0')).toMatchObject({
      title: `'=HYPERLINK("http://evil.example","click")`,
      description: 'line one\nline "two", with comma',
      severity: 'critical',
      location: 'src/app.ts:42:7',
    });
    expect(byFp.get('fp-1')).toMatchObject({ title: "'+1+1", description: "'-2+3" });
    expect(byFp.get('fp-2')).toMatchObject({ title: "'@SUM(A1:A2)", description: '' });
    expect(byFp.get('fp-3')).toMatchObject({ title: "'-10", description: "'\tindented" });
    expect(byFp.get('fp-4')).toMatchObject({ title: 'Plain, with comma', description: "'\rcarriage", location: '' });
    expect(byFp.get('fp-5')!.title).toBe(TRICKY[5].title);
    // No field of any record starts with a formula trigger.
    for (const r of records) for (const v of Object.values(r)) expect(v).not.toMatch(/^[=+\-@\t\r]/);
  });

  it('csvField quotes and escapes per RFC 4180', () => {
    expect(csvField('plain')).toBe('plain');
    expect(csvField(null)).toBe('');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\r\nlines')).toBe('"two\r\nlines"');
    expect(csvField('=1+2')).toBe("'=1+2");
    expect(csvField('=A1,"x"')).toBe(`"'=A1,""x"""`);
  });
});

describe('filters, scope and access', () => {
  it('applies the list filters', async () => {
    const records: Array<Record<string, string>> = parse((await exportAs('csv', '&severity=critical,high&status=open,regressed')).text, { columns: true });
    expect(records.map((r) => r.fingerprint).sort()).toEqual(['fp-0', 'fp-6']);
    expect((await exportAs('json', '&severity=urgent')).status).toBe(422);
  });

  it('needs findings:export (members lack it) and a valid format (400)', async () => {
    const res = await exportAs('sarif', '', org.member.token);
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('findings:export');
    const key = await createKey(h, org.admin.token, ['findings:read']);
    expect((await exportAs('csv', '', key)).status).toBe(403);
    expect((await exportAs('xml')).status).toBe(400);
    expect((await request(h.app).get('/api/v1/findings/export').set(bearer(org.admin.token))).status).toBe(400);
  });

  it('exports only what the caller can read; another organization exports nothing of ours', async () => {
    const empty = JSON.parse((await exportAs('json', '', org.manager.token)).text);
    expect(empty.data).toEqual([]);
    await insertGrant(h, org.id, { assessmentId: assessment.id }, { userId: org.manager.id }, 'read');
    expect(JSON.parse((await exportAs('json', '', org.manager.token)).text).count).toBe(TRICKY.length);
    const foreign = await exportAs('sarif', '', other.admin.token);
    expect(foreign.status).toBe(200);
    const log = JSON.parse(foreign.text);
    expect(validate(log)).toBe(true);
    expect(log.runs[0].results).toEqual([]);
  });
});
