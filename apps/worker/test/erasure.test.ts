// GDPR erasure (governance:erase): filing (by user id or e-mail), the preview, the confirmation, cancelling and
// retrying through the API, and the worker's erasure job against a database of this file's own. The first test is
// the black-box run of issue 34: members named `$2b`, `Northwind` and `northwind.example` in one organization,
// namesakes and the northwind.example domain in another; every table is checksummed before and after, and only
// the rows the erasure may touch (the requesting organization's, the erased accounts') may differ.
import { QueueEvents } from 'bullmq';
import request from 'supertest';
import { Client } from 'pg';
import { newId } from '@svc/db';
import { createDeliveryQueue, createRedis } from '@svc/queue';
import { recordSecurityNotice } from '@svc/outbox';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHarness, uniqueSuffix, type Harness } from '../../api/test/support/harness';
import { bearer, createOrg, createUserInOrg, insertProject, TEST_PASSWORD, type TestOrg, type TestUser } from '../../api/test/support/fixtures';
import { createKey, insertAssessmentIn, insertFinding, insertReadyReport } from '../../api/test/support/domain';
import { loginRequest, resetLinkFor } from '../../api/test/support/auth-helpers';
import type { WorkerDeps } from '../src/deps';
import { runErasures } from '../src/erasure';
import { recordAs, recordInOrganizations } from '../../api/src/modules/audit/audit.context';
import type { Principal } from '../../api/src/auth/principal';
import { CONFIGURER_LOST_ROLE_REASON } from '../../api/src/modules/access/event-routing';
import { renderReport } from '../src/reports/report-job';
import { MAINTENANCE_SCHEDULES, runMaintenanceJob } from '../src/maintenance';
import { startWorker } from '../src/worker';
import { buildWorker, spawnWorker } from './support/child-worker';
import type { World } from './support/world';
import { createIsolatedDatabase } from '../../../test-support/databases';
import { waitFor } from '../../../test-support/private-services';
import { backendPid, lockWaiters as countLockWaiters, waitingFor } from '../../../test-support/pg-locks';
import { sha256Hex } from '../../api/src/lib/crypto';
import { joinInvitedOrganization } from '../../api/src/modules/invitations/invitations.service';
import { userForIdentity } from '../../api/src/modules/oauth/oauth.service';

let h: Harness;
let deps: WorkerDeps;
let database: { url: string; drop(): Promise<void> };
let pg: Client;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  database = await createIsolatedDatabase();
  h = await createHarness({ DATABASE_URL: database.url, LOGIN_RATE_LIMIT_PER_MINUTE: '1000', RATE_LIMIT_PER_MINUTE: '5000' });
  deps = { config: h.config, logger: h.deps.logger, prisma: h.deps.prisma, redis: () => createRedis(h.config.redisUrl), clock: h.clock };
  pg = new Client({ connectionString: database.url });
  await pg.connect();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(async () => {
  await pg?.end();
  await h.close();
  await database.drop();
});
// After the clean-up above (afterAll hooks run in order): no key of this file's is left in Redis, the child worker's
// included (its prefix is under the file's).
afterAll(async () => {
  const redis = createRedis(h.config.redisUrl);
  try {
    expect(await redis.keys(`${h.config.redisPrefix}*`)).toEqual([]);
  } finally {
    await redis.quit();
  }
});

const api = () => request(h.app);
const BASE = '/api/v1/governance/erasure-requests';
const file = (token: string, body: unknown) => api().post(BASE).set(bearer(token)).send(body as object);
const read = async (id: string, token = org.admin.token) => (await api().get(`${BASE}/${id}`).set(bearer(token))).body;

type Filed = { id: string; status: string; pseudonym: { name: string; email: string }; preview: Preview | null };
type Preview = { membership: boolean; account: boolean; name_searched: boolean; audit_entries: number; reports: number; columns: Array<{ table: string; column: string; rows: number; samples: Array<{ id: string; excerpt: string }> }> };

async function fileFor(token: string, body: { user_id?: string; email?: string }): Promise<Filed> {
  const res = await file(token, body);
  expect(res.status).toBe(202);
  expect(res.body.status).toBe('previewing');
  return res.body;
}

/** Files, lets the worker preview, confirms, lets the worker erase: the request as completed. */
async function eraseFully(token: string, body: { user_id?: string; email?: string }) {
  const filed = await fileFor(token, body);
  await runErasures(deps);
  expect((await read(filed.id, token)).status).toBe('awaiting_confirmation');
  const confirmed = await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(token));
  expect(confirmed.status).toBe(202);
  expect(confirmed.body.status).toBe('erasing');
  await runErasures(deps);
  const done = await read(filed.id, token);
  expect(done.status).toBe('completed');
  return done as Filed & { receipt: Record<string, unknown> & { replaced: Array<{ table: string; column: string; rows: number }> } };
}

/** A member of `inOrg` with the given display name (and, optionally, e-mail). */
async function member(inOrg: TestOrg, name: string, email?: string, role: 'member' | 'admin' | 'manager' = 'member'): Promise<TestUser & { name: string }> {
  const user = await createUserInOrg(h, inOrg.id, role, `p${uniqueSuffix()}`);
  const data = email ? { name, email } : { name };
  await h.deps.prisma.user.update({ where: { id: user.id }, data });
  return { ...user, ...data, name };
}

function pdfText(pdf: Buffer): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'svc-erasure-')), 'report.pdf');
  writeFileSync(file, pdf);
  return execFileSync('pdftotext', ['-layout', file, '-'], { encoding: 'utf8' });
}

// ---- checksums ----

/** Every base table with whether it has an organization_id. */
async function tables(): Promise<Array<{ name: string; org: boolean }>> {
  const { rows } = await pg.query(`
    SELECT t.table_name AS name, EXISTS (SELECT 1 FROM information_schema.columns c WHERE c.table_schema = t.table_schema
      AND c.table_name = t.table_name AND c.column_name = 'organization_id') AS org
    FROM information_schema.tables t WHERE t.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND t.table_name <> '_prisma_migrations'
    ORDER BY 1`);
  return rows;
}

/**
 * md5 of every table's rows (whole rows as text, in order), leaving out only the rows the erasure may touch: the
 * organization's own rows (and its attempts and team members, which hang off its deliveries and teams), and the
 * rows of the accounts it may erase.
 */
async function checksums(organizationId: string, erasedAccounts: string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const accounts = `ARRAY[${erasedAccounts.map((id) => `'${id}'`).join(',')}]::text[]`;
  const mayTouch: Record<string, string> = {
    webhook_attempts: `t.delivery_id IN (SELECT id FROM webhook_deliveries WHERE organization_id = $1)`,
    team_members: `t.team_id IN (SELECT id FROM teams WHERE organization_id = $1)`,
    users: `t.id = ANY(${accounts})`,
    oauth_identities: `t.user_id = ANY(${accounts})`,
    personal_source_connections: `t.user_id = ANY(${accounts})`,
    email_tokens: `t.user_id = ANY(${accounts})`,
    security_notices: `t.user_id = ANY(${accounts})`,
  };
  for (const table of await tables()) {
    const excluded = (table.org ? 't.organization_id = $1' : (mayTouch[table.name] ?? 'false')).replace(/\$1/g, `'${organizationId}'`);
    const { rows } = await pg.query(
      `SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) AS sum, count(*)::int AS n FROM "${table.name}" t WHERE (${excluded}) IS NOT TRUE`,
    );
    out[table.name] = `${rows[0].n}:${rows[0].sum}`;
  }
  return out;
}

/** Rows (as text) of one organization's table containing a string. */
async function rowsContaining(organizationId: string, needle: string): Promise<string[]> {
  const found: string[] = [];
  for (const table of await tables()) {
    if (!table.org) continue;
    const { rows } = await pg.query(`SELECT count(*)::int AS n FROM "${table.name}" t WHERE t.organization_id = $1 AND strpos(t::text, $2) > 0`, [organizationId, needle]);
    if (rows[0].n > 0) found.push(table.name);
  }
  const attempts = await pg.query(
    `SELECT count(*)::int AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.organization_id = $1 AND strpos(a::text, $2) > 0`,
    [organizationId, needle],
  );
  if (attempts.rows[0].n > 0) found.push('webhook_attempts');
  const texts = await pg.query(
    `SELECT count(*)::int AS n FROM report_rendered_texts t JOIN reports r ON r.id = t.report_id WHERE r.organization_id = $1 AND strpos(t.text, $2) > 0`,
    [organizationId, needle],
  );
  if (texts.rows[0].n > 0) found.push('report_rendered_texts');
  return found.sort();
}

// ---- traces ----

/** Where a real organization's records hold people: findings, events, deliveries and attempts, targets, shares. */
async function traces(inOrg: TestOrg, texts: string[], extra: { recipients?: string[]; shareTo?: string; inviteTo?: string } = {}) {
  const project = await insertProject(h, inOrg.id, `Project ${uniqueSuffix()}`);
  const assessment = await insertAssessmentIn(h, inOrg.id, project.id, 'completed');
  const text = texts.join(' / ');
  const finding = await insertFinding(h, assessment, { description: `Reported by ${text}; hash $2b$10$N9qo8uLOickgx2ZMRZoMye.` });
  const report = await insertReadyReport(h, inOrg.id, assessment.id, { title: `Pentest ${uniqueSuffix()}` });
  const event = await h.deps.prisma.event.create({
    data: { id: newId('event'), organizationId: inOrg.id, type: 'finding.updated', data: { note: text, finding_id: finding.id } },
  });
  const subscription = await h.deps.prisma.webhookSubscription.create({
    data: {
      id: newId('whsub'),
      organizationId: inOrg.id,
      level: 'organization',
      name: `Alerts ${uniqueSuffix()}`,
      url: 'https://203.0.114.10/hooks',
      events: ['finding.updated'],
      severityFilter: [],
      statusFilter: [],
      secretEnc: 'v1.sealed',
      kind: extra.recipients ? 'email' : 'webhook',
      emailRecipients: extra.recipients ?? [],
    },
  });
  const delivery = await h.deps.prisma.webhookDelivery.create({
    data: {
      id: newId('whdel'),
      organizationId: inOrg.id,
      subscriptionId: subscription.id,
      eventId: event.id,
      eventType: 'finding.updated',
      payload: { data: { note: text } },
      payloadFormat: 'service',
      status: 'failed',
    },
  });
  await h.deps.prisma.webhookAttempt.create({
    data: { id: newId('whatt'), deliveryId: delivery.id, number: 1, startedAt: new Date(), durationMs: 5, outcome: 'http_error', responseStatus: 400, responseBody: `unknown user ${text}` },
  });
  if (extra.shareTo) {
    await h.deps.prisma.reportShare.create({
      data: { id: newId('rsh'), organizationId: inOrg.id, reportId: report.id, kind: 'email', email: extra.shareTo, tokenHash: uniqueSuffix(), createdById: inOrg.admin.id },
    });
  }
  if (extra.inviteTo) {
    await h.deps.prisma.invitation.create({
      data: { id: newId('inv'), organizationId: inOrg.id, email: extra.inviteTo, role: 'member', tokenHash: uniqueSuffix(), invitedById: inOrg.admin.id, expiresAt: new Date(Date.now() + 86400_000) },
    });
  }
  return { project, assessment, finding, report, subscription };
}

async function expectLogsIn(user: { email: string }) {
  const res = await loginRequest(h, { email: user.email, password: TEST_PASSWORD });
  expect([user.email, res.status]).toEqual([user.email, 200]);
}

describe('an erasure stays inside the requesting organization (issue 34)', () => {
  it('erases $2b, Northwind and northwind.example in A: every other organization and account is byte-identical, everyone else logs in', async () => {
    const a = await createOrg(h, `Acme ${uniqueSuffix()}`);
    const b = await createOrg(h, 'Northwind');
    const s = uniqueSuffix();
    const dollar = await member(a, '$2b', `dollar-${s}@example.test`);
    const northwind = await member(a, 'Northwind', `nw-${s}@example.test`);
    const domain = await member(a, 'northwind.example', `dom-${s}@example.test`);
    // Kept in A: a colleague at the northwind.example domain. In B: namesakes, the domain, and A's people quoted.
    const keeper = await member(a, 'Keeper Person', `keeper-${s}@northwind.example`);
    const namesakes = [
      await member(b, '$2b', `dollar-${s}@northwind.example`),
      await member(b, 'Northwind', `ceo-${s}@northwind.example`),
      await member(b, 'northwind.example', `it-${s}@northwind.example`),
    ];
    const quoted = [dollar.email, northwind.email, domain.email, keeper.email, '$2b', 'Northwind', 'northwind.example'];
    const inA = await traces(a, quoted);
    await traces(b, quoted);
    // Each erased person leaves audit entries with IP and user agent (their sign-in).
    for (const p of [dollar, northwind, domain]) await expectLogsIn(p);

    const erased = [dollar.id, northwind.id, domain.id];
    const before = await checksums(a.id, erased);
    const receipts = [];
    for (const p of [dollar, northwind, domain]) receipts.push(await eraseFully(a.owner.token, { user_id: p.id }));
    const after = await checksums(a.id, erased);
    expect(after).toEqual(before);

    // Every other user of the service still signs in with their password.
    for (const u of [a.owner, a.admin, a.manager, a.member, keeper, b.owner, b.admin, b.manager, b.member, ...namesakes, org.owner, other.owner]) {
      await expectLogsIn(u);
    }
    // The erased cannot, and nothing of their e-mails is left in A; A's other text is as it was.
    for (const p of [dollar, northwind, domain]) {
      expect((await loginRequest(h, { email: p.email, password: TEST_PASSWORD })).status).toBe(401);
      expect(await rowsContaining(a.id, p.email)).toEqual([]);
    }
    const finding = await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: inA.finding.id } });
    expect(finding.description).toBe(
      `Reported by ${receipts[0].pseudonym.email} / ${receipts[1].pseudonym.email} / ${receipts[2].pseudonym.email} / ${keeper.email} / $2b / Northwind / northwind.example; hash $2b$10$N9qo8uLOickgx2ZMRZoMye.`,
    );
    expect((await h.deps.prisma.organization.findUniqueOrThrow({ where: { id: b.id } })).name).toBe('Northwind');
    // Single-word and symbol names are not searched in free text; the receipts say where the e-mails went.
    for (const r of receipts) {
      expect(r.preview!.name_searched).toBe(false);
      expect(r.receipt).toMatchObject({ membership_removed: true, account_erased: true, audit_entries_scrubbed: expect.any(Number) });
      expect(r.receipt.replaced.map((c) => `${c.table}.${c.column}`)).toEqual(
        expect.arrayContaining(['findings.description', 'events.data', 'webhook_deliveries.payload', 'webhook_attempts.response_body', 'users.email']),
      );
    }
    // Their sign-ins keep who and when, lose where from.
    const audits = await h.deps.prisma.auditEvent.findMany({ where: { organizationId: a.id, actorId: { in: erased }, action: 'auth.login' } });
    expect(audits.length).toBe(3);
    for (const e of audits) expect([e.ip, e.userAgent, e.actorLabel?.endsWith('@erased.invalid')]).toEqual([null, null, true]);
  }, 120_000);

  it('a PDF that named the person is rendered again whatever its text became since; one that never did stays ready though its findings changed', async () => {
    // The PDF is a snapshot: a project renamed after the render no longer names the person, but its PDF still does.
    // The text each PDF was rendered from is kept beside it (report_rendered_texts) and searched.
    const a = await createOrg(h);
    const zelda = await member(a, 'Zelda Quuxley');
    const connection = deps.redis();
    const deliveryQueue = createDeliveryQueue(connection, deps.config);
    const rendered = async (projectName: string, findingTitle: string) => {
      const project = await insertProject(h, a.id, projectName);
      const assessment = await insertAssessmentIn(h, a.id, project.id, 'completed');
      const finding = await insertFinding(h, assessment, { title: findingTitle });
      const report = await h.deps.prisma.report.create({ data: { id: newId('rpt'), organizationId: a.id, assessmentId: assessment.id, title: 'Quarterly', status: 'pending' } });
      expect(await renderReport(deps, deliveryQueue, report.id)).toBe('ready');
      return { project, finding, report };
    };
    try {
      const named = await rendered('Zelda Quuxley portal', 'Open redirect');
      const never = await rendered('Billing', 'SQL injection');
      // A report rendered before texts were kept (no row), its project changed since: rendered again, to be safe.
      const legacyProject = await insertProject(h, a.id, 'Legacy');
      const legacy = await insertReadyReport(h, a.id, (await insertAssessmentIn(h, a.id, legacyProject.id, 'completed')).id);
      await new Promise((r) => setTimeout(r, 5));
      expect((await api().patch(`/api/v1/projects/${named.project.id}`).set(bearer(a.admin.token)).send({ name: 'Portal' })).status).toBe(200);
      expect((await api().patch(`/api/v1/projects/${legacyProject.id}`).set(bearer(a.admin.token)).send({ name: 'Legacy 2' })).status).toBe(200);
      await h.deps.prisma.finding.update({ where: { id: never.finding.id }, data: { title: 'SQL injection in search' } });

      const preview = await fileFor(a.admin.token, { user_id: zelda.id });
      await runErasures(deps);
      expect((await read(preview.id, a.admin.token)).preview).toMatchObject({ reports: 2 });
      await api().post(`${BASE}/${preview.id}/cancel`).set(bearer(a.admin.token));

      const done = await eraseFully(a.admin.token, { user_id: zelda.id });
      expect(done.receipt.reports_regenerated).toEqual([named.report.id, legacy.id].sort());
      const statusOf = async (id: string) => (await h.deps.prisma.report.findUniqueOrThrow({ where: { id }, select: { status: true } })).status;
      expect(await statusOf(named.report.id)).toBe('pending');
      expect(await statusOf(never.report.id)).toBe('ready');
      expect(await h.deps.prisma.reportRenderedText.findUnique({ where: { reportId: named.report.id } })).toBeNull();
      expect(await rowsContaining(a.id, 'Quuxley')).toEqual([]);
      // Rendered again, it keeps the text it was rendered from: the new project name, not the person.
      expect(await renderReport(deps, deliveryQueue, named.report.id)).toBe('ready');
      expect((await h.deps.prisma.reportRenderedText.findUniqueOrThrow({ where: { reportId: named.report.id } })).text).toContain('Portal');
    } finally {
      await deliveryQueue.close();
      await connection.quit();
    }
  });

  it('a person still in another organization keeps that account; the name is searched when it is a full name', async () => {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const zelda = await member(a, 'Zelda Quuxley');
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: b.id, userId: zelda.id, role: 'member' } });
    const namesake = await member(b, 'Zelda Quuxley');
    const inA = await traces(a, [`ZELDA QUUXLEY <${zelda.email}>`]);
    await traces(b, [`Zelda Quuxley <${zelda.email}>`, namesake.email]);
    const published = await api().post(`/api/v1/reports/${inA.report.id}/publication`).set(bearer(a.admin.token)).send({});
    expect(published.status).toBe(201);
    const shared = () => api().get(`/api/v1/shared/reports/${published.body.url.split('/').pop()}`);
    expect((await shared()).status).toBe(200);
    // She signs in to A (her first organization) once: A's audit log then names her account as an actor.
    await expectLogsIn(zelda);
    const before = await checksums(a.id, []);
    const done = await eraseFully(a.admin.token, { user_id: zelda.id });
    expect(await checksums(a.id, [])).toEqual(before);
    expect(done.receipt).toMatchObject({ membership_removed: true, account_erased: false });
    expect(done.preview!.name_searched).toBe(true);
    const finding = await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: inA.finding.id } });
    expect(finding.description).toContain(`${done.pseudonym.name} <${done.pseudonym.email}>`);
    expect(await rowsContaining(a.id, 'Quuxley')).toEqual([]);
    // Still signs in (to B), with their own name and e-mail.
    await expectLogsIn(zelda);
    expect((await h.deps.prisma.user.findUniqueOrThrow({ where: { id: zelda.id } })).name).toBe('Zelda Quuxley');
    // A's audit log still names her account's id (pseudonymized): A's search for people must not show her name and
    // address, kept for B, again.
    for (const q of ['Quuxley', zelda.email]) {
      const search = await api().get(`/api/v1/governance/erasure-candidates?q=${encodeURIComponent(q)}`).set(bearer(a.admin.token));
      expect([search.status, search.body.data]).toEqual([200, []]);
    }
    // The report whose PDF was rendered from the finding is rendered again; the other organization's stays ready.
    const report = await h.deps.prisma.report.findUniqueOrThrow({ where: { id: inA.report.id }, omit: { pdf: true } });
    expect(report.status).toBe('pending');
    expect(done.receipt.reports_regenerated).toEqual([inA.report.id]);
    // Its published link says so until the new PDF is ready.
    const meanwhile = await shared();
    expect([meanwhile.status, meanwhile.body.detail]).toEqual([409, expect.stringMatching(/being regenerated because personal data was erased/)]);
    // Rendered again (as the report job does), the PDF holds the pseudonym, not the person.
    const connection = deps.redis();
    const deliveryQueue = createDeliveryQueue(connection, deps.config);
    try {
      expect(await renderReport(deps, deliveryQueue, inA.report.id)).toBe('ready');
    } finally {
      await deliveryQueue.close();
      await connection.quit();
    }
    const rendered = await h.deps.prisma.report.findUniqueOrThrow({ where: { id: inA.report.id } });
    const text = pdfText(Buffer.from(rendered.pdf!));
    expect((await shared()).status).toBe(200);
    expect(text).toContain(done.pseudonym.email);
    expect(text).not.toContain(zelda.email);
    expect(text.toLowerCase()).not.toContain('quuxley');
  });
});

/**
 * `base` whose first findings read returns its rows only once `release()` is called (`read` resolves when it has
 * them): a report render held between reading the text and storing its PDF. The database is the real one.
 */
function holdAfterFindingsRead(base: WorkerDeps) {
  let signalRead!: () => void;
  let release!: () => void;
  const read = new Promise<void>((resolve) => (signalRead = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  let held = false;
  const passThrough = (target: object, prop: string | symbol) => {
    const value = Reflect.get(target, prop, target) as unknown;
    return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
  };
  const findings = new Proxy(base.prisma.finding, {
    get(target, prop) {
      if (prop !== 'findMany') return passThrough(target, prop);
      return async (...args: unknown[]) => {
        const rows = await (target.findMany as (...a: unknown[]) => Promise<unknown>)(...args);
        if (!held) {
          held = true;
          signalRead();
          await released;
        }
        return rows;
      };
    },
  });
  const prisma = new Proxy(base.prisma, { get: (target, prop) => (prop === 'finding' ? findings : passThrough(target, prop)) });
  return { deps: { ...base, prisma } as WorkerDeps, read, release };
}

describe('a report rendered while the erasure runs', () => {
  it('keeps nothing of the person: a render that read the text before it was rewritten stores nothing, and renders again', async () => {
    const a = await createOrg(h);
    const person = await member(a, 'Ottilie Vandersloot');
    const inA = await traces(a, [`Ottilie Vandersloot <${person.email}>`]);
    // The report was just requested: pending, its render under way.
    await h.deps.prisma.report.update({ where: { id: inA.report.id }, data: { status: 'pending', pdf: null, sizeBytes: null, readyAt: null } });
    const connection = deps.redis();
    const deliveryQueue = createDeliveryQueue(connection, deps.config);
    const hold = holdAfterFindingsRead(deps);
    try {
      const rendering = renderReport(hold.deps, deliveryQueue, inA.report.id);
      await hold.read;
      // The render holds the person's text; the erasure runs to its end meanwhile.
      const done = await eraseFully(a.admin.token, { user_id: person.id });
      expect(done.receipt.reports_regenerated).toEqual([inA.report.id]);
      hold.release();
      expect(await rendering).toBe('ready');
      const rendered = await h.deps.prisma.report.findUniqueOrThrow({ where: { id: inA.report.id } });
      expect(rendered.status).toBe('ready');
      const text = pdfText(Buffer.from(rendered.pdf!));
      expect(text).toContain(done.pseudonym.email);
      expect(text).not.toContain(person.email);
      expect(text.toLowerCase()).not.toContain('vandersloot');
      // Announced once, for the PDF that was stored.
      const announced = await h.deps.prisma.event.findMany({ where: { organizationId: a.id, type: 'report.ready' } });
      expect(announced.map((e) => (e.data as { report_id: string }).report_id)).toEqual([inA.report.id]);
    } finally {
      hold.release();
      await deliveryQueue.close();
      await connection.quit();
    }
  });
});

describe('a report rendered while an erasure runs in its organization', () => {
  it('stores nothing and announces nothing until the erasure has ended, then renders from the rewritten text', async () => {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const person = await member(a, 'Wilhelmina Quastberg');
    const inA = await traces(a, [`Wilhelmina Quastberg <${person.email}>`]);
    // Another organization quotes the same name and address in two pending reports of its own.
    const inB = await traces(b, [`Wilhelmina Quastberg <${person.email}>`]);
    const waitingInB = await insertReadyReport(h, b.id, inB.assessment.id, { title: `Also ${person.email}` });
    // A report whose very title names the person, requested just now (and B's, alike).
    for (const [id, title] of [[inA.report.id, `Review for ${person.email}`], [inB.report.id, `Review for ${person.email}`], [waitingInB.id, `Also ${person.email}`]]) {
      await h.deps.prisma.report.update({ where: { id }, data: { status: 'pending', pdf: null, sizeBytes: null, readyAt: null, title } });
    }
    const waitingInBBefore = await h.deps.prisma.report.findUniqueOrThrow({ where: { id: waitingInB.id }, omit: { pdf: true } });
    const filed = await fileFor(a.admin.token, { user_id: person.id });
    await runErasures(deps);
    expect((await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(a.admin.token))).status).toBe(202);
    const connection = deps.redis();
    const deliveryQueue = createDeliveryQueue(connection, deps.config);
    try {
      // The erasure is under way (its passes may have rewritten the events already): the render stores nothing.
      expect(await renderReport(deps, deliveryQueue, inA.report.id)).toBe('erasure_running');
      expect(await h.deps.prisma.report.findUniqueOrThrow({ where: { id: inA.report.id }, omit: { pdf: true } })).toMatchObject({ status: 'pending' });
      expect(await h.deps.prisma.event.count({ where: { organizationId: a.id, type: 'report.ready' } })).toBe(0);
      // The other organization's reports are not held back by A's erasure.
      expect(await renderReport(deps, deliveryQueue, inB.report.id)).toBe('ready');
      await runErasures(deps);
      const done = await read(filed.id, a.admin.token);
      expect(done.status).toBe('completed');
      expect(await renderReport(deps, deliveryQueue, inA.report.id)).toBe('ready');
      const rendered = await h.deps.prisma.report.findUniqueOrThrow({ where: { id: inA.report.id } });
      expect(pdfText(Buffer.from(rendered.pdf!))).not.toContain(person.email);
      // Neither the report, its event nor anything else of the organization holds the person.
      const announced = await h.deps.prisma.event.findMany({ where: { organizationId: a.id, type: 'report.ready' } });
      expect(announced.map((e) => (e.data as { title: string }).title)).toEqual([`Review for ${done.pseudonym.email}`]);
      expect(await rowsContaining(a.id, person.email)).toEqual([]);
      // B's are untouched: its rendered report keeps its own text, its pending one was not moved by A's erasure.
      const renderedInB = await h.deps.prisma.report.findUniqueOrThrow({ where: { id: inB.report.id } });
      expect(pdfText(Buffer.from(renderedInB.pdf!))).toContain(person.email);
      expect(await h.deps.prisma.report.findUniqueOrThrow({ where: { id: waitingInB.id }, omit: { pdf: true } })).toEqual(waitingInBBefore);
      expect(await rowsContaining(b.id, person.email)).toEqual(expect.arrayContaining(['events', 'findings', 'reports']));
    } finally {
      await deliveryQueue.close();
      await connection.quit();
    }
  });
});

describe('security notices of an erased person', () => {
  it("go with the erased account; a person who stays in another organization keeps theirs, and nobody else's change", async () => {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const gone = await member(a, 'Notice Gone');
    const stays = await member(a, 'Notice Stays');
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: b.id, userId: stays.id, role: 'member' } });
    const colleague = await member(a, 'Notice Colleague');
    const elsewhere = await member(b, 'Notice Elsewhere');
    const people = [gone, stays, colleague, elsewhere];
    for (const p of people) {
      await h.deps.prisma.$transaction(async (tx) => {
        await recordSecurityNotice(tx, { userId: p.id, notice: { kind: 'password_changed' }, ip: '203.0.113.9', at: new Date() });
        const key = { name: `key of ${p.name}`, prefix: 'sk-svc-AbCd', expiresAt: null, scopeCount: 1 };
        await recordSecurityNotice(tx, { userId: p.id, notice: { kind: 'api_key_created', key, organizationName: a.name, lastThisHour: false }, ip: null, at: new Date() });
      });
    }
    const count = (userId: string) => h.deps.prisma.securityNotice.count({ where: { userId } });
    const before = await checksums(a.id, [gone.id]);
    expect((await eraseFully(a.owner.token, { user_id: gone.id })).receipt).toMatchObject({ account_erased: true });
    expect((await eraseFully(a.owner.token, { user_id: stays.id })).receipt).toMatchObject({ account_erased: false });
    // Only the erased account's rows changed anywhere outside organization A.
    expect(await checksums(a.id, [gone.id])).toEqual(before);
    expect(await Promise.all(people.map((p) => count(p.id)))).toEqual([0, 2, 2, 2]);
  });
});

describe('preview, then confirmation', () => {
  it('previews without changing anything, with counts and masked samples; only an owner or admin confirms', async () => {
    const p = await member(org, 'Ada Lovelace');
    const t = await traces(org, [`Ada Lovelace <${p.email}>`]);
    const everything = async () => {
      const sums = await checksums('none', []);
      delete sums.erasure_requests;
      delete sums.audit_events;
      return sums;
    };
    const before = await everything();
    const filed = await fileFor(org.admin.token, { user_id: p.id });
    expect(JSON.stringify(filed)).not.toContain(p.email);
    expect(await runErasures(deps)).toEqual({ previewed: 1, completed: 0, failed: 0 });
    expect(await everything()).toEqual(before);
    // Another run does not erase an unconfirmed request.
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 0, failed: 0 });
    expect(await everything()).toEqual(before);

    const previewed = await read(filed.id);
    expect(previewed.status).toBe('awaiting_confirmation');
    const preview = previewed.preview as Preview;
    expect(preview).toMatchObject({ membership: true, account: true, name_searched: true, reports: 1 });
    const description = preview.columns.find((c) => c.table === 'findings' && c.column === 'description')!;
    expect(description.rows).toBe(1);
    expect(description.samples).toEqual([{ id: t.finding.id, excerpt: expect.stringContaining('Reported by [name] <[e-mail]>') }]);
    expect(JSON.stringify(previewed)).not.toContain(p.email);
    expect(JSON.stringify(previewed)).not.toContain('Lovelace');

    for (const who of [org.manager, org.member]) {
      const res = await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(who.token));
      expect(res.status).toBe(403);
    }
    const res = await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(org.admin.token));
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'erasing', confirmed_by_user_id: org.admin.id, confirmed_at: expect.any(String) });
    // Confirmed requests can no longer be cancelled or confirmed twice.
    expect((await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(org.admin.token))).status).toBe(409);
    expect((await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(org.admin.token))).status).toBe(409);
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 1, failed: 0 });
    const done = await read(filed.id);
    expect(done.receipt.replaced).toEqual(expect.arrayContaining([{ table: 'findings', column: 'description', rows: 1 }]));
    const actions = await h.deps.prisma.auditEvent.findMany({ where: { targetId: filed.id }, orderBy: { id: 'asc' }, select: { action: true } });
    expect(actions.map((a) => a.action)).toEqual(['erasure.requested', 'erasure.confirmed', 'erasure.completed']);
    // Nothing of the person is left in the request.
    const row = await h.deps.prisma.erasureRequest.findUniqueOrThrow({ where: { id: filed.id } });
    expect(row.subjectEnc).toBeNull();
  });

  it('cancels before the confirmation: the job leaves the person alone; a cancelled request is neither cancelled again nor retried', async () => {
    const p = await member(org, 'Grace Hopper');
    const filed = await fileFor(org.admin.token, { user_id: p.id });
    await runErasures(deps);
    const cancelled = await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(org.admin.token));
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', cancelled_at: expect.any(String) });
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 0, failed: 0 });
    expect((await h.deps.prisma.user.findUniqueOrThrow({ where: { id: p.id } })).email).toBe(p.email);
    expect((await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(org.admin.token))).status).toBe(409);
    expect((await api().post(`${BASE}/${filed.id}/retry`).set(bearer(org.admin.token))).status).toBe(409);
    expect((await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(org.admin.token))).status).toBe(409);
    const again = await fileFor(org.admin.token, { user_id: p.id });
    expect((await api().post(`${BASE}/${again.id}/cancel`).set(bearer(org.admin.token))).status).toBe(200);
  });
});

describe('people without an account', () => {
  it('erases an invitee, a share grantee and a notification recipient by e-mail, in this organization only', async () => {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const s = uniqueSuffix();
    const guest = `Guest.${s}@Outside.test`;
    const inA = await traces(a, [guest.toLowerCase()], { recipients: [`first-${s}@outside.test`, guest, `last-${s}@outside.test`], shareTo: guest, inviteTo: guest });
    await traces(b, [guest], { recipients: [guest], shareTo: guest, inviteTo: guest });
    const before = await checksums(a.id, []);
    // Unknown addresses are 404; the address is matched case-insensitively.
    expect((await file(a.admin.token, { email: `nobody-${s}@outside.test` })).status).toBe(404);
    const done = await eraseFully(a.admin.token, { email: guest.toUpperCase() });
    expect(await checksums(a.id, [])).toEqual(before);
    expect(done).toMatchObject({ subject: 'email', user_id: null });
    expect(done.receipt).toMatchObject({ membership_removed: false, account_erased: false });
    expect(done.receipt.replaced.map((c) => `${c.table}.${c.column}`)).toEqual(
      expect.arrayContaining(['invitations.email', 'report_shares.email', 'webhook_subscriptions.email_recipients', 'findings.description']),
    );
    expect(await rowsContaining(a.id, guest)).toEqual([]);
    expect(await rowsContaining(a.id, guest.toLowerCase())).toEqual([]);
    const target = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: inA.subscription.id } });
    expect(target.emailRecipients).toEqual([`first-${s}@outside.test`, `last-${s}@outside.test`]);
    const share = await h.deps.prisma.reportShare.findFirstOrThrow({ where: { organizationId: a.id, reportId: inA.report.id } });
    expect([share.email, share.revokedAt]).toEqual([done.pseudonym.email, expect.any(Date)]);
    // A second request for the same address: already erased.
    expect((await file(a.admin.token, { email: guest })).status).toBe(404);
  });

  it('erases a share grantee who has an account in another organization by e-mail, leaving that account alone', async () => {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const grantee = await member(b, 'Gran Tee', `grantee-${uniqueSuffix()}@partner.test`);
    const inA = await traces(a, [grantee.email], { shareTo: grantee.email });
    const candidates = await api().get(`/api/v1/governance/erasure-candidates?q=${encodeURIComponent(grantee.email)}`).set(bearer(a.admin.token));
    expect(candidates.body.data).toEqual([{ user_id: null, name: null, email: grantee.email, kind: 'share_grantee', role: null }]);
    const before = await checksums(a.id, []);
    const done = await eraseFully(a.admin.token, { email: grantee.email });
    expect(done).toMatchObject({ subject: 'email', user_id: null });
    expect(await checksums(a.id, [])).toEqual(before);
    expect(await rowsContaining(a.id, grantee.email)).toEqual([]);
    expect((await h.deps.prisma.reportShare.findFirstOrThrow({ where: { reportId: inA.report.id } })).revokedAt).not.toBeNull();
    await expectLogsIn(grantee);
  });
});

describe('at volume: batches, progress, a worker killed midway', () => {
  it('resumes where a SIGKILLed worker stopped and finishes, each attempt changed once', async () => {
    const a = await createOrg(h);
    const p = await member(a, 'Kill Resume');
    const t = await traces(a, [p.email]);
    const delivery = await h.deps.prisma.webhookDelivery.findFirstOrThrow({ where: { organizationId: a.id } });
    const ATTEMPTS = 30_000;
    await pg.query(
      `INSERT INTO webhook_attempts (id, delivery_id, number, started_at, duration_ms, outcome, response_status, response_body)
       SELECT 'att_bulk' || lpad(n::text, 8, '0'), $1, n + 1, now(), 3, 'http_error', 400, 'no such user ' || $2 || ' #' || n
       FROM generate_series(1, $3) AS n`,
      [delivery.id, p.email, ATTEMPTS],
    );
    const filed = await fileFor(a.admin.token, { user_id: p.id });
    await runErasures(deps);
    expect((await read(filed.id, a.admin.token)).preview.columns).toEqual(
      expect.arrayContaining([expect.objectContaining({ table: 'webhook_attempts', column: 'response_body', rows: ATTEMPTS + 1 })]),
    );
    expect((await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(a.admin.token))).status).toBe(202);

    buildWorker();
    const world = { h, tls: { caFile: '' } } as unknown as World;
    // Its own Redis prefix: the jobs its schedulers leave behind do not run in this file's later workers. Under the
    // file's prefix (`<prefix>:child`), so that the harness's clean-up deletes its keys with the file's.
    const child = spawnWorker(world, {
      REDIS_PREFIX: `${h.config.redisPrefix}:child`,
      ERASURE_INTERVAL_MS: '1000',
      ERASURE_BATCH_SIZE: '100',
      OUTBOX_RELAY_INTERVAL_MS: '600000',
    });
    // Killed once it is well into the attempts, before the end.
    const deadline = Date.now() + 90_000;
    let cursor: string | null = null;
    while (Date.now() < deadline) {
      const row = await h.deps.prisma.erasureRequest.findUniqueOrThrow({ where: { id: filed.id } });
      const progress = row.progress as { step?: string; cursor?: string | null } | null;
      if (progress?.step === 'free_text:webhook_attempts' && progress.cursor && progress.cursor > 'att_bulk00005000') {
        cursor = progress.cursor;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    child.process.kill('SIGKILL');
    await child.exited;
    expect(cursor).not.toBeNull();
    const stopped = await h.deps.prisma.erasureRequest.findUniqueOrThrow({ where: { id: filed.id } });
    expect(stopped.status).toBe('erasing');
    const { rows: left } = await pg.query(`SELECT count(*)::int AS n FROM webhook_attempts WHERE strpos(response_body, $1) > 0`, [p.email]);
    expect(left[0].n).toBeGreaterThan(0);
    expect(left[0].n).toBeLessThan(ATTEMPTS);

    // The next run (here in this process) resumes after the recorded key and completes. (Until PostgreSQL has
    // noticed the killed worker's connection, its row lock stands and a run skips the request, as another worker's.)
    let run = await runErasures(deps);
    for (let i = 0; i < 100 && run.completed === 0; i += 1) {
      expect(run.failed).toBe(0);
      await new Promise((r) => setTimeout(r, 100));
      run = await runErasures(deps);
    }
    expect(run).toEqual({ previewed: 0, completed: 1, failed: 0 });
    const done = await read(filed.id, a.admin.token);
    expect(done.status).toBe('completed');
    expect(done.receipt.replaced).toEqual(expect.arrayContaining([{ table: 'webhook_attempts', column: 'response_body', rows: ATTEMPTS + 1 }]));
    expect(await rowsContaining(a.id, p.email)).toEqual([]);
    expect(t.finding.id).toBeDefined();
  }, 180_000);
});

describe("a run's time budget", () => {
  it('stops after the step in hand once the budget is spent, leaves the next request for later, and the next runs complete both', async () => {
    const first = await member(org, 'Budget First');
    const second = await member(org, 'Budget Second');
    const filed = [await fileFor(org.admin.token, { user_id: first.id }), await fileFor(org.admin.token, { user_id: second.id })];
    expect(await runErasures(deps)).toEqual({ previewed: 2, completed: 0, failed: 0 });
    for (const f of filed) expect((await api().post(`${BASE}/${f.id}/confirm`).set(bearer(org.admin.token))).status).toBe(202);
    const progressOf = async (id: string) => (await h.deps.prisma.erasureRequest.findUniqueOrThrow({ where: { id } })).progress;

    // A spent budget: one step of the first request, recorded; the second is not started.
    expect(await runErasures(deps, 0)).toEqual({ previewed: 0, completed: 0, failed: 0 });
    expect((await read(filed[0].id)).status).toBe('erasing');
    const afterOne = await progressOf(filed[0].id);
    expect(afterOne).not.toBeNull();
    expect(await progressOf(filed[1].id)).toBeNull();
    expect(await runErasures(deps, 0)).toEqual({ previewed: 0, completed: 0, failed: 0 });
    const afterTwo = await progressOf(filed[0].id);
    expect(afterTwo).not.toEqual(afterOne);

    // A request filed meanwhile is previewed first (a person waits for it), not after the erasures; the oldest
    // erasure still takes its one step of the run.
    const later = await fileFor(org.admin.token, { user_id: (await member(org, 'Budget Later')).id });
    expect(await runErasures(deps, 0)).toEqual({ previewed: 1, completed: 0, failed: 0 });
    expect((await read(later.id)).status).toBe('awaiting_confirmation');
    expect(await progressOf(filed[0].id)).not.toEqual(afterTwo);
    expect(await progressOf(filed[1].id)).toBeNull();
    expect((await api().post(`${BASE}/${later.id}/cancel`).set(bearer(org.admin.token))).status).toBe(200);

    let runs = 2;
    let completed = 0;
    while (completed < 2 && runs < 200) {
      completed += (await runErasures(deps, 0)).completed;
      runs += 1;
    }
    expect(completed).toBe(2);
    expect(runs).toBeGreaterThan(4);
    for (const [i, person] of [first, second].entries()) {
      const done = await read(filed[i].id);
      expect(done.status).toBe('completed');
      expect(done.receipt).toMatchObject({ membership_removed: true, account_erased: true });
      expect((await h.deps.prisma.user.findUnique({ where: { id: person.id } }))?.email ?? null).not.toBe(person.email);
    }
  });
});

describe('previews do not hold erasures back', () => {
  it("an erasure confirmed before a steady flow of previews (another organization's, 20 a run) completes", async () => {
    // Another organization's admin files erasure requests for 20 people each run (the job takes 20 requests a run),
    // cancelling them once previewed and filing them again: every run finds 20 previews waiting.
    const people = await Promise.all(Array.from({ length: 20 }, (_, i) => member(org, `Flood ${i}`)));
    const third = await createOrg(h);
    const victim = await member(third, 'Waiting Person');
    const filed = await fileFor(third.admin.token, { user_id: victim.id });
    await runErasures(deps);
    expect((await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(third.admin.token))).status).toBe(202);

    for (let round = 0; round < 3 && (await read(filed.id, third.admin.token)).status === 'erasing'; round += 1) {
      const flood = [];
      for (const p of people) flood.push(await fileFor(org.admin.token, { user_id: p.id }));
      expect((await runErasures(deps)).previewed).toBe(20);
      for (const f of flood) expect((await api().post(`${BASE}/${f.id}/cancel`).set(bearer(org.admin.token))).status).toBe(200);
    }
    expect((await read(filed.id, third.admin.token)).status).toBe('completed');
  }, 120_000);

  it('a run whose previews spent its budget still takes a step of the oldest erasure', async () => {
    const erased = await member(org, 'Budget Erased');
    const filed = await fileFor(org.admin.token, { user_id: erased.id });
    await runErasures(deps);
    expect((await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(org.admin.token))).status).toBe(202);
    const progressOf = async () => (await h.deps.prisma.erasureRequest.findUniqueOrThrow({ where: { id: filed.id } })).progress;
    const later = await fileFor(org.admin.token, { user_id: (await member(org, 'Budget Previewed')).id });
    expect(await runErasures(deps, 0)).toEqual({ previewed: 1, completed: 0, failed: 0 });
    expect((await read(later.id)).status).toBe('awaiting_confirmation');
    expect(await progressOf()).not.toBeNull();
    expect((await api().post(`${BASE}/${later.id}/cancel`).set(bearer(org.admin.token))).status).toBe(200);
    for (let runs = 0; runs < 50 && (await read(filed.id)).status === 'erasing'; runs += 1) await runErasures(deps);
    expect((await read(filed.id)).status).toBe('completed');
  });
});

describe('the job on a real worker', () => {
  it('runs from the maintenance queue, on the schedule every worker registers', async () => {
    expect(MAINTENANCE_SCHEDULES.map((s) => s.name)).toContain('erasure');
    const p = await member(org, 'Queue Person');
    const filed = await fileFor(org.admin.token, { user_id: p.id });
    const running = await startWorker(deps, { schedule: false });
    const connection = deps.redis();
    const events = new QueueEvents(running.maintenanceQueue.name, { connection, prefix: running.maintenanceQueue.opts.prefix });
    try {
      await events.waitUntilReady();
      const job = await running.maintenanceQueue.add('erasure', {}, { removeOnComplete: true });
      expect(await job.waitUntilFinished(events, 30_000)).toEqual({ previewed: 1, completed: 0, failed: 0 });
      expect((await read(filed.id)).status).toBe('awaiting_confirmation');
    } finally {
      await events.close();
      await connection.quit();
      await running.close();
    }
    await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(org.admin.token));
  });
});

describe('filing, failing and retrying', () => {
  it('refuses the owner with 409 while they own the organization', async () => {
    const res = await file(org.admin.token, { user_id: org.owner.id });
    expect(res.status).toBe(409);
    expect(res.body.detail).toMatch(/owner/i);
    expect(await h.deps.prisma.erasureRequest.count({ where: { subjectUserId: org.owner.id } })).toBe(0);
  });

  it("tells the API to forget a member it removed even when a later step fails: the member's cached key is refused at once", async () => {
    const p = await member(org, 'Cache Keeper', undefined, 'manager');
    const key = await createKey(h, p.token, ['projects:read']);
    await traces(org, [p.email]); // a finding naming them: the free-text step after the membership's rewrites it
    const fn = `fail_findings_${uniqueSuffix().replace(/[^a-z0-9]/gi, '')}`;
    await h.deps.prisma.$executeRawUnsafe(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'findings are read-only now'; END $$`);
    await h.deps.prisma.$executeRawUnsafe(`CREATE TRIGGER ${fn} BEFORE UPDATE ON findings FOR EACH ROW WHEN (NEW.organization_id = '${org.id}') EXECUTE FUNCTION ${fn}()`);
    let filed: Filed;
    try {
      filed = await fileFor(org.admin.token, { user_id: p.id });
      await runErasures(deps);
      expect((await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(org.admin.token))).status).toBe(202);
      // The key's principal cached (the first request learns its owner, the second caches it under the owner's epochs).
      for (let i = 0; i < 2; i++) expect((await api().get('/api/v1/projects').set(bearer(key))).status).toBe(200);
      expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 0, failed: 1 });
      expect((await read(filed.id)).status).toBe('failed');
      // Stopped amid its free-text passes it holds the organization's reports and SLA breaches, and says so.
      expect((await read(filed.id)).error).toMatch(/Until it completes, no report is rendered and no SLA breach is published/);
      // The membership step committed (the key revoked with it) before the findings step failed.
      expect((await api().get('/api/v1/projects').set(bearer(key))).status).toBe(401);
    } finally {
      await h.deps.prisma.$executeRawUnsafe(`DROP TRIGGER IF EXISTS ${fn} ON findings`);
      await h.deps.prisma.$executeRawUnsafe(`DROP FUNCTION IF EXISTS ${fn}()`);
    }
    // Retried once the cause is gone, it resumes and completes.
    expect((await api().post(`${BASE}/${filed.id}/retry`).set(bearer(org.admin.token))).status).toBe(202);
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 1, failed: 0 });
  });

  it('fails a confirmed request whose person became owner meanwhile, and resumes it on retry once ownership moved on', async () => {
    const fresh = await createOrg(h);
    const p = await member(fresh, 'Owen Later', undefined, 'admin');
    const filed = await fileFor(fresh.owner.token, { user_id: p.id });
    await runErasures(deps);
    expect((await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(fresh.owner.token))).status).toBe(202);
    await h.deps.prisma.membership.updateMany({ where: { organizationId: fresh.id, userId: fresh.owner.id }, data: { role: 'admin' } });
    await h.deps.prisma.membership.updateMany({ where: { organizationId: fresh.id, userId: p.id }, data: { role: 'owner' } });
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 0, failed: 1 });
    const failed = await read(filed.id, fresh.admin.token);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, error: expect.stringMatching(/owns the organization/), progress_step: null });
    // Refused before any free-text pass: it holds nothing back, and says nothing of it.
    expect(failed.error).not.toMatch(/no report is rendered/);
    expect((await h.deps.prisma.user.findUniqueOrThrow({ where: { id: p.id } })).email).toBe(p.email);
    expect((await file(fresh.admin.token, { user_id: p.id })).status).toBe(409);
    expect((await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(fresh.admin.token))).status).toBe(409);

    await h.deps.prisma.membership.updateMany({ where: { organizationId: fresh.id, userId: p.id }, data: { role: 'admin' } });
    await h.deps.prisma.membership.updateMany({ where: { organizationId: fresh.id, userId: fresh.owner.id }, data: { role: 'owner' } });
    const retried = await api().post(`${BASE}/${filed.id}/retry`).set(bearer(fresh.owner.token));
    expect(retried.status).toBe(202);
    expect(retried.body).toMatchObject({ status: 'erasing', error: null });
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 1, failed: 0 });
    expect(await read(filed.id, fresh.admin.token)).toMatchObject({ status: 'completed', attempts: 2 });
    expect((await api().post(`${BASE}/${filed.id}/retry`).set(bearer(fresh.owner.token))).status).toBe(409);
    expect((await file(fresh.admin.token, { user_id: p.id })).status).toBe(409);
    const actions = await h.deps.prisma.auditEvent.findMany({ where: { targetId: filed.id }, orderBy: { id: 'asc' }, select: { action: true } });
    expect(actions.map((a) => a.action)).toEqual(['erasure.requested', 'erasure.confirmed', 'erasure.failed', 'erasure.retried', 'erasure.completed']);
  });

  it('answers 404 for a person the organization does not know, 400 for malformed bodies', async () => {
    expect((await file(org.admin.token, { user_id: other.member.id })).status).toBe(404);
    expect((await file(org.admin.token, { email: other.member.email })).status).toBe(404);
    expect((await file(org.admin.token, { user_id: newId('usr') })).status).toBe(404);
    for (const body of [{}, { user_id: 'nope' }, { email: 'not-an-address' }, { user_id: org.member.id, email: org.member.email }, { user_id: org.member.id, extra: 1 }]) {
      const res = await file(org.admin.token, body);
      expect([JSON.stringify(body), res.status]).toEqual([JSON.stringify(body), 400]);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
  });

  it("keeps organizations apart: another organization's request answers 404 to read, confirm, cancel and retry", async () => {
    const p = await member(org, 'Apart Person');
    const filed = await fileFor(org.admin.token, { user_id: p.id });
    for (const req of [
      api().get(`${BASE}/${filed.id}`),
      api().post(`${BASE}/${filed.id}/confirm`),
      api().post(`${BASE}/${filed.id}/cancel`),
      api().post(`${BASE}/${filed.id}/retry`),
    ]) {
      expect((await req.set(bearer(other.owner.token))).status).toBe(404);
    }
    expect((await api().get(BASE).set(bearer(other.owner.token))).body.data).toEqual([]);
    const list = await api().get(`${BASE}?status=previewing`).set(bearer(org.owner.token));
    expect(list.body.data.map((r: { id: string }) => r.id)).toContain(filed.id);
    await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(org.admin.token));
  });

  it('an invitation does not make an account of another organization known: no name or id of it, and the account is never erased', async () => {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const s = uniqueSuffix();
    const bob = await member(b, `Private Person`, `private-${s}@partner.test`);
    // Bob leaves B: his account belongs to no organization. A's admin invites his address (anyone can be invited).
    await api().delete(`/api/v1/members/${bob.id}`).set(bearer(b.owner.token)).expect((r) => expect(r.status).toBeLessThan(300));
    expect((await api().post('/api/v1/invitations').set(bearer(a.admin.token)).send({ email: bob.email, role: 'member' })).status).toBe(201);
    const candidates = await api().get(`/api/v1/governance/erasure-candidates?q=${encodeURIComponent(bob.email)}`).set(bearer(a.admin.token));
    expect(candidates.body.data).toEqual([{ user_id: null, name: null, email: bob.email, kind: 'invitee', role: null }]);
    expect((await file(a.admin.token, { user_id: bob.id })).status).toBe(404);
    const account = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: bob.id } });
    const done = await eraseFully(a.admin.token, { email: bob.email });
    expect(done).toMatchObject({ subject: 'email', user_id: null, receipt: { account_erased: false } });
    expect(await h.deps.prisma.user.findUniqueOrThrow({ where: { id: bob.id } })).toEqual(account);
    expect(await rowsContaining(a.id, bob.email)).toEqual([]);
  });

  it('disables the routes the erased person last configured, as removing them from the organization does', async () => {
    const a = await createOrg(h);
    const x = await member(a, 'Route Maker', `routes-${uniqueSuffix()}@example.test`, 'admin');
    const { subscription } = await traces(a, []);
    await h.deps.prisma.webhookSubscription.update({ where: { id: subscription.id }, data: { configuredByUserId: x.id } });
    await eraseFully(a.owner.token, { user_id: x.id });
    const route = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: subscription.id } });
    expect({ status: route.status, reason: route.disabledReason }).toEqual({ status: 'disabled', reason: CONFIGURER_LOST_ROLE_REASON });
    const audited = await h.deps.prisma.auditEvent.count({ where: { organizationId: a.id, action: 'webhook.subscription_disabled', targetId: subscription.id } });
    expect(audited).toBe(1);
  });

  it('erases the e-mail and name at the start of a line of JSON text (after an escaped newline or tab)', async () => {
    const a = await createOrg(h);
    const s = uniqueSuffix();
    const p = await member(a, 'Linda Newline', `linda-${s}@example.test`);
    const note = (email: string, name: string) => `Reported by:\n${email}\n\t${name}`;
    const event = await h.deps.prisma.event.create({
      data: { id: newId('event'), organizationId: a.id, type: 'finding.updated', data: { note: note(p.email, p.name) } },
    });
    const done = await eraseFully(a.admin.token, { user_id: p.id });
    expect(await rowsContaining(a.id, p.email)).toEqual([]);
    const after = await h.deps.prisma.event.findUniqueOrThrow({ where: { id: event.id } });
    expect((after.data as { note: string }).note).toBe(note(done.pseudonym.email, done.pseudonym.name));
  });

  it('finds candidates by name or e-mail among the organization\'s people only', async () => {
    const s = uniqueSuffix();
    const p = await member(org, `Findable ${s}`);
    await member(other, `Findable ${s}`);
    await h.deps.prisma.invitation.create({
      data: { id: newId('inv'), organizationId: org.id, email: `findable-${s}@outside.test`, role: 'member', tokenHash: uniqueSuffix(), invitedById: org.admin.id, expiresAt: new Date(Date.now() + 86400_000) },
    });
    const res = await api().get(`/api/v1/governance/erasure-candidates?q=${encodeURIComponent(s)}`).set(bearer(org.admin.token));
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([
      { user_id: p.id, name: `Findable ${s}`, email: p.email, kind: 'member', role: 'member' },
      { user_id: null, name: null, email: `findable-${s}@outside.test`, kind: 'invitee', role: null },
    ]);
    expect((await api().get('/api/v1/governance/erasure-candidates?q=x').set(bearer(org.admin.token))).status).toBe(400);
    expect((await api().get(`/api/v1/governance/erasure-candidates?q=${s}`).set(bearer(org.manager.token))).status).toBe(403);
  });

  it('needs governance:erase to file, confirm, cancel and retry, governance:read to list: managers and members get 403', async () => {
    for (const user of [org.manager, org.member]) {
      const res = await file(user.token, { user_id: org.member.id });
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('governance:erase');
      const list = await api().get(BASE).set(bearer(user.token));
      expect(list.status).toBe(403);
      expect(list.body.detail).toContain('governance:read');
    }
    const readOnly = await createKey(h, org.admin.token, ['governance:read']);
    expect((await api().get(BASE).set(bearer(readOnly))).status).toBe(200);
    expect((await file(readOnly, { user_id: org.member.id })).status).toBe(403);
  });
});

describe('an erased member loses what DELETE /members/:id takes away', () => {
  it("an erased admin's pending invitations no longer admit anyone; other people's stay valid", async () => {
    const fresh = await createOrg(h);
    const p = await member(fresh, 'Ivy Inviter', undefined, 'admin');
    const tokenOf = async (inviter: TestUser, email: string) => {
      const res = await api().post('/api/v1/invitations').set(bearer(inviter.token)).send({ email, role: 'admin' });
      expect(res.status).toBe(201);
      const mail = h.mail().filter((m) => m.to === email).pop()!;
      return /accept-invite\?token=([A-Za-z0-9_-]+)/.exec(mail.text)![1];
    };
    // Before, the erased admin could accept this link with a second address of theirs and be an admin again.
    const alt = `alt-${uniqueSuffix()}@example.test`;
    const theirs = await tokenOf(p, alt);
    const others = await tokenOf(fresh.owner, `kept-${uniqueSuffix()}@example.test`);
    const done = await eraseFully(fresh.owner.token, { user_id: p.id });
    // The receipt and the audit log count them (this organization's one; the owner's stays).
    expect(done.receipt.invitations_revoked).toBe(1);
    const completed = await api().get('/api/v1/audit-events?action=erasure.completed').set(bearer(fresh.owner.token));
    expect(completed.body.data).toEqual([expect.objectContaining({ target_id: done.id, metadata: expect.objectContaining({ invitations_revoked: 1 }) })]);

    const res = await api().post('/api/v1/invitations/accept').send({ token: theirs, password: 'a brand new passphrase' });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.any(String) });
    expect(await h.deps.prisma.user.count({ where: { email: alt } })).toBe(0);
    expect((await api().post('/api/v1/invitations/accept').send({ token: others, password: 'a brand new passphrase' })).status).toBe(200);
  });
  it('a password reset confirmed while the account is erased: neither deadlocks, the erasure completes and leaves no link', async () => {
    const fresh = await createOrg(h);
    const p = await member(fresh, 'Rosa Resetter');
    expect((await api().post('/api/v1/auth/password-reset').send({ email: p.email })).status).toBe(202);
    const { token } = await resetLinkFor(h, p.email);
    const filed = await fileFor(fresh.owner.token, { user_id: p.id });
    await runErasures(deps);
    expect((await api().post(`${BASE}/${filed.id}/confirm`).set(bearer(fresh.owner.token))).status).toBe(202);

    // What the reset's confirmation does (apps/api/src/modules/auth/password-reset.ts): the user's row first, then
    // the link's token. Here it holds the row while the erasure runs up to it, then claims the token.
    const confirmation = new Client({ connectionString: database.url });
    await confirmation.connect();
    try {
      await confirmation.query('BEGIN');
      await confirmation.query('SELECT status FROM users WHERE id = $1 FOR NO KEY UPDATE', [p.id]);
      const pid = await backendPid(confirmation);
      const run = runErasures(deps);
      await waitFor('the erasure waiting for the account', async () => (await waitingFor(pg, pid)) > 0, 20_000);
      const claimed = await confirmation.query("UPDATE email_tokens SET used_at = now() WHERE user_id = $1 AND purpose = 'reset_password' AND used_at IS NULL", [p.id]);
      expect(claimed.rowCount).toBe(1);
      await confirmation.query('COMMIT');
      expect(await run).toEqual({ previewed: 0, completed: 1, failed: 0 });
    } finally {
      await confirmation.query('ROLLBACK').catch(() => undefined);
      await confirmation.end();
    }
    expect((await read(filed.id, fresh.owner.token)).status).toBe('completed');
    expect(await h.deps.prisma.emailToken.count({ where: { userId: p.id } })).toBe(0);
    expect((await api().post('/api/v1/auth/password-reset/confirm').send({ token, new_password: 'a brand new passphrase' })).status).toBe(400);
  });
});

describe("requests racing the erasure (a failed sign-in's entry in each of the person's organizations; a passed one's session and entry; any request's entry)", () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const until = (what: string, check: () => Promise<boolean>) => waitFor(what, check, 10_000);
  const blockedBy = (pid: number) => waitingFor(pg, pid);
  const lockWaiters = () => countLockWaiters(pg);
  /** The person's entries of one action as each organization's audit log holds them. */
  const entriesOf = (action: string) => async (userId: string) =>
    (await pg.query(
      `SELECT organization_id, actor_label, ip, user_agent FROM audit_events WHERE action = $1 AND actor_id = $2 ORDER BY organization_id`,
      [action, userId],
    )).rows;
  /** The failed sign-ins of the person; their sign-ins. */
  const failures = entriesOf('auth.login_failed');
  const signIns = entriesOf('auth.login');
  /** Audit entries, in any organization, holding the address anywhere (label, metadata, IP, user agent). */
  const entriesHolding = async (email: string) =>
    (await pg.query(`SELECT organization_id, action FROM audit_events WHERE strpos(lower(audit_events::text), lower($1)) > 0`, [email])).rows;
  /** md5 of every row of the organization, table by table. */
  async function organizationRows(organizationId: string): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const table of await tables()) {
      if (!table.org) continue;
      const { rows } = await pg.query(
        `SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) AS sum, count(*)::int AS n FROM "${table.name}" t WHERE t.organization_id = $1`,
        [organizationId],
      );
      out[table.name] = `${rows[0].n}:${rows[0].sum}`;
    }
    return out;
  }

  /** Files an erasure of the person in each organization, lets the worker preview them and confirms them: the next run erases. */
  async function confirmedErasures(userId: string, ...by: TestOrg[]): Promise<Filed[]> {
    const filed = [];
    for (const o of by) filed.push(await fileFor(o.owner.token, { user_id: userId }));
    await runErasures(deps);
    for (const [i, o] of by.entries()) expect((await api().post(`${BASE}/${filed[i]!.id}/confirm`).set(bearer(o.owner.token))).status).toBe(202);
    return filed;
  }

  /**
   * Another connection holds `lockSql`'s row while `request` starts; once the request waits for it, the erasure runs
   * as far as it can (with `erasureWaits`, it must not get to the end); then the row is let go and both finish.
   */
  async function whileRowHeld<T>(lockSql: string, params: unknown[], request: () => Promise<T>, { erasureWaits = false } = {}) {
    const holder = new Client({ connectionString: database.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(lockSql, params);
      const pid = await backendPid(holder);
      const answered = request();
      answered.catch(() => undefined);
      await until('the request waits for the held row', async () => (await blockedBy(pid)) > 0);
      let settled = false;
      const run = runErasures(deps).finally(() => {
        settled = true;
      });
      run.catch(() => undefined);
      // The erasure waits too (for the request's write, or for the held row), or it finished.
      await until('the erasure went as far as it could', async () => settled || (await lockWaiters()) >= 2);
      if (erasureWaits) expect(settled).toBe(false);
      await holder.query('COMMIT');
      const result = await run;
      const answer = await answered;
      await until('everything finished', async () => (await lockWaiters()) === 0);
      return { result, answer };
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  }

  /**
   * The interleaving: a sign-in has read where the person is a member and its write (a failed sign-in's audit entry,
   * written after the answer; a passed one's session and entry) is held up by another connection holding
   * `heldOrganizationId`'s row (their foreign key); the erasure goes as far as it can, without finishing.
   */
  const signInStraddlingTheErasure = <T>(heldOrganizationId: string, signIn: () => Promise<T>) =>
    whileRowHeld('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [heldOrganizationId], signIn, { erasureWaits: true });

  async function failedSignInStraddlingTheErasure(person: { email: string }, heldOrganizationId: string) {
    const { result } = await signInStraddlingTheErasure(heldOrganizationId, async () => {
      expect((await loginRequest(h, { email: person.email, password: 'not the password at all' })).status).toBe(401);
    });
    return result;
  }

  /** The person's live sessions, by organization. */
  const liveSessions = async (userId: string) =>
    (await pg.query(`SELECT organization_id FROM sessions WHERE user_id = $1 AND revoked_at IS NULL ORDER BY organization_id`, [userId])).rows;

  it('the entry is written while the person is a member, then pseudonymized: no entry holds the address, none lands after they left', async () => {
    const a = await createOrg(h);
    const unrelated = await createOrg(h);
    const p = await member(a, 'Stella Straddler');
    const [filed] = await confirmedErasures(p.id, a);
    const unrelatedBefore = await organizationRows(unrelated.id);

    const result = await failedSignInStraddlingTheErasure(p, a.id);
    expect(result).toEqual({ previewed: 0, completed: 1, failed: 0 });
    const done = await read(filed.id, a.owner.token);
    expect([done.status, done.receipt.account_erased]).toEqual(['completed', true]);

    expect(await entriesHolding(p.email)).toEqual([]);
    // Scrubbed with the person's other entries: it was written while they were a member, not after they left.
    expect(await failures(p.id)).toEqual([{ organization_id: a.id, actor_label: filed.pseudonym.email, ip: null, user_agent: null }]);
    expect(await organizationRows(unrelated.id)).toEqual(unrelatedBefore);
  });

  it('an audit write that waits for the erasure to take the person out writes nothing where they no longer are', async () => {
    const a = await createOrg(h);
    const p = await member(a, 'Wanda Waiter');
    const [filed] = await confirmedErasures(p.id, a);
    // Another connection holds the person's session: the erasure's membership step, which revokes it, waits for it
    // after taking the person's row and removing the membership, with neither committed.
    const holder = new Client({ connectionString: database.url });
    await holder.connect();
    let run: Promise<unknown> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM sessions WHERE user_id = $1 FOR UPDATE', [p.id]);
      const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      run = runErasures(deps);
      run.catch(() => undefined);
      await until('the erasure waits inside its membership step', async () => (await blockedBy(pid)) > 0);
      expect((await loginRequest(h, { email: p.email, password: 'not the password at all' })).status).toBe(401);
      await until('the audit write of the failed sign-in waits for the erasure', async () => (await lockWaiters()) >= 2);
      await holder.query('COMMIT');
      expect(await run).toEqual({ previewed: 0, completed: 1, failed: 0 });
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    await until('the audit write finished', async () => (await lockWaiters()) === 0);
    await sleep(300);
    expect((await read(filed.id, a.owner.token)).status).toBe('completed');
    expect(await failures(p.id)).toEqual([]);
    expect(await entriesHolding(p.email)).toEqual([]);
  });

  it('a person in two organizations, erased by both: neither keeps the address, an unrelated organization is untouched', async () => {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const unrelated = await createOrg(h);
    const p = await member(a, 'Tomas Twofold');
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: b.id, userId: p.id, role: 'member' } });
    // B's erasure runs first (the older request): the person then is a member of A only, and A's erases the account.
    const [inB, inA] = await confirmedErasures(p.id, b, a);
    await pg.query(`UPDATE erasure_requests SET created_at = created_at - interval '1 minute' WHERE id = $1`, [inB.id]);
    const unrelatedBefore = await organizationRows(unrelated.id);

    const result = await failedSignInStraddlingTheErasure(p, a.id);
    expect(result).toEqual({ previewed: 0, completed: 2, failed: 0 });
    expect((await read(inA.id, a.owner.token)).receipt.account_erased).toBe(true);
    expect((await read(inB.id, b.owner.token)).receipt.account_erased).toBe(false);

    expect(await entriesHolding(p.email)).toEqual([]);
    expect(await failures(p.id)).toEqual(
      [
        { organization_id: a.id, actor_label: inA.pseudonym.email, ip: null, user_agent: null },
        { organization_id: b.id, actor_label: inB.pseudonym.email, ip: null, user_agent: null },
      ].sort((x, y) => x.organization_id.localeCompare(y.organization_id)),
    );
    expect(await organizationRows(unrelated.id)).toEqual(unrelatedBefore);
    expect(await h.deps.prisma.membership.count({ where: { userId: p.id } })).toBe(0);
  });

  /** A member of A and of B (joined later), with a session in A; A's erasure of them is confirmed (the account stays: B). */
  async function inTwoErasedByA() {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const p = await member(a, 'Sam Signer');
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: b.id, userId: p.id, role: 'member', createdAt: new Date(Date.now() + 1000) } });
    const [filed] = await confirmedErasures(p.id, a);
    return { a, b, p, filed: filed! };
  }

  it('a sign-in that commits before the erasure takes the person out: its session is revoked with the others and its entry pseudonymized', async () => {
    const { a, b, p, filed } = await inTwoErasedByA();
    const unrelated = await createOrg(h);
    const unrelatedBefore = await organizationRows(unrelated.id);

    const { result, answer } = await signInStraddlingTheErasure(a.id, () => loginRequest(h, { email: p.email, password: TEST_PASSWORD, organization_id: a.id }));
    expect(result).toEqual({ previewed: 0, completed: 1, failed: 0 });
    expect(answer.status).toBe(200);
    expect((await read(filed.id, a.owner.token)).receipt.account_erased).toBe(false);

    expect(await signIns(p.id)).toEqual([{ organization_id: a.id, actor_label: filed.pseudonym.email, ip: null, user_agent: null }]);
    expect(await liveSessions(p.id)).toEqual([]);
    // Still a member of B, where the session they just got is no key: it was opened in A.
    expect((await request(h.app).get('/api/v1/auth/me').set(bearer(answer.body.token))).status).toBe(401);
    expect(await h.deps.prisma.membership.findMany({ where: { userId: p.id }, select: { organizationId: true } })).toEqual([{ organizationId: b.id }]);
    expect(await organizationRows(unrelated.id)).toEqual(unrelatedBefore);
  });

  /** The erasure stopped inside its membership step (the person's row taken, the membership removed, neither committed). */
  async function withErasureInsideMembershipStep(userId: string, whileHeld: () => Promise<void>) {
    const holder = new Client({ connectionString: database.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM sessions WHERE user_id = $1 AND revoked_at IS NULL FOR UPDATE', [userId]);
      const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      const run = runErasures(deps);
      run.catch(() => undefined);
      await until('the erasure waits inside its membership step', async () => (await blockedBy(pid)) > 0);
      await whileHeld();
      await holder.query('COMMIT');
      expect(await run).toEqual({ previewed: 0, completed: 1, failed: 0 });
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  }

  it('a sign-in into the organization that waits for the erasure to take the person out is refused, with no session or entry there', async () => {
    const { a, p } = await inTwoErasedByA();
    let answer: Promise<request.Response> | undefined;
    await withErasureInsideMembershipStep(p.id, async () => {
      answer = loginRequest(h, { email: p.email, password: TEST_PASSWORD, organization_id: a.id }).then((r) => r);
      answer.catch(() => undefined);
      await until('the sign-in waits for the erasure', async () => (await lockWaiters()) >= 2);
    });
    const res = await answer!;
    expect([res.status, res.body.detail]).toEqual([403, 'You are not a member of that organization.']);
    expect(await signIns(p.id)).toEqual([]);
    expect(await liveSessions(p.id)).toEqual([]);
    expect(await entriesHolding(p.email)).toEqual([]);
  });

  it('a sign-in into their first organization that waits for the erasure lands in the one they are still in', async () => {
    const { a, b, p } = await inTwoErasedByA();
    let answer: Promise<request.Response> | undefined;
    await withErasureInsideMembershipStep(p.id, async () => {
      answer = loginRequest(h, { email: p.email, password: TEST_PASSWORD }).then((r) => r);
      answer.catch(() => undefined);
      await until('the sign-in waits for the erasure', async () => (await lockWaiters()) >= 2);
    });
    const res = await answer!;
    expect(res.status).toBe(200);
    expect((await request(h.app).get('/api/v1/auth/me').set(bearer(res.body.token))).body.organization.id).toBe(b.id);
    expect((await signIns(p.id)).map((e: { organization_id: string }) => e.organization_id)).toEqual([b.id]);
    expect(await liveSessions(p.id)).toEqual([{ organization_id: b.id }]);
    expect((await pg.query(`SELECT count(*)::int AS n FROM audit_events WHERE organization_id = $1 AND ip IS NOT NULL AND actor_id = $2`, [a.id, p.id])).rows[0].n).toBe(0);
  });

  it("a request under way as the person when the erasure completes: the follow-up, 15 minutes on, scrubs what it recorded there, and only there", async () => {
    const { a, b, p, filed } = await inTwoErasedByA();
    const unrelated = await createOrg(h);
    // Authenticated as the person before the erasure (their session in A), recording its change after it completed.
    const underWay: Principal = { kind: 'session', userId: p.id, organizationId: a.id, role: 'member', scopes: new Set(), sessionId: p.sessionId };
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 1, failed: 0 });
    const meta = { ip: '203.0.113.7', userAgent: 'late-client/1.0' };
    const lateChange = { action: 'api_key.created' as const, target: { type: 'api_key', id: newId('key') } };
    await recordAs(h.deps.prisma, underWay, meta, new Date(), lateChange);
    // Their own request in B, where they are still a member: not the erasure's business.
    await recordAs(h.deps.prisma, { ...underWay, organizationId: b.id }, meta, new Date(), lateChange);
    const unrelatedBefore = await organizationRows(unrelated.id);
    const late = async (organizationId: string) =>
      (await pg.query(`SELECT actor_label, ip, user_agent FROM audit_events WHERE organization_id = $1 AND actor_id = $2 AND action = 'api_key.created'`, [organizationId, p.id])).rows;

    // Not yet due: a request may still be under way.
    await runMaintenanceJob(deps, undefined as never, 'erasure');
    expect(await late(a.id)).toEqual([{ actor_label: p.email, ip: meta.ip, user_agent: meta.userAgent }]);
    expect((await read(filed.id, a.owner.token)).receipt.late_audit_entries_scrubbed).toBeUndefined();

    await pg.query(`UPDATE erasure_requests SET completed_at = completed_at - interval '15 minutes' WHERE id = $1`, [filed.id]);
    await runMaintenanceJob(deps, undefined as never, 'erasure');
    expect(await late(a.id)).toEqual([{ actor_label: filed.pseudonym.email, ip: null, user_agent: null }]);
    expect((await read(filed.id, a.owner.token)).receipt.late_audit_entries_scrubbed).toBe(1);
    expect(await entriesHolding(p.email).then((rows) => rows.map((r: { organization_id: string }) => r.organization_id))).toEqual([b.id]);
    expect(await late(b.id)).toEqual([{ actor_label: p.email, ip: meta.ip, user_agent: meta.userAgent }]);
    expect(await organizationRows(unrelated.id)).toEqual(unrelatedBefore);

    // Once: a later entry (none can come from the person in A now) is not looked for again.
    await recordAs(h.deps.prisma, underWay, meta, new Date(), lateChange);
    await runMaintenanceJob(deps, undefined as never, 'erasure');
    expect((await late(a.id)).filter((e: { ip: string | null }) => e.ip !== null)).toHaveLength(1);
    expect((await read(filed.id, a.owner.token)).receipt.late_audit_entries_scrubbed).toBe(1);
  });

  it('a person invited back within the 15 minutes: the follow-up scrubs what was recorded before they rejoined, not what they did since', async () => {
    const { a, b, p, filed } = await inTwoErasedByA();
    const unrelated = await createOrg(h);
    const underWay: Principal = { kind: 'session', userId: p.id, organizationId: a.id, role: 'member', scopes: new Set(), sessionId: p.sessionId };
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 1, failed: 0 });
    const meta = { ip: '203.0.113.9', userAgent: 'late-client/1.0' };
    await recordAs(h.deps.prisma, underWay, meta, new Date(), { action: 'api_key.created', target: { type: 'api_key', id: newId('key') } });

    // A's owner invites the same account again; they accept with their password and sign in there.
    const invited = await api().post('/api/v1/invitations').set(bearer(a.owner.token)).send({ email: p.email, role: 'member' });
    expect(invited.status).toBe(201);
    const token = /accept-invite\?token=([A-Za-z0-9_-]+)/.exec(h.mail().filter((m) => m.to === p.email).pop()!.text)![1];
    expect((await api().post('/api/v1/invitations/accept').send({ token, password: TEST_PASSWORD })).status).toBe(200);
    expect((await loginRequest(h, { email: p.email, password: TEST_PASSWORD, organization_id: a.id })).status).toBe(200);
    const entries = async () =>
      (await pg.query(`SELECT action, actor_label, ip IS NOT NULL AS has_ip FROM audit_events WHERE organization_id = $1 AND actor_id = $2 AND action <> 'erasure.completed' ORDER BY created_at, action`, [a.id, p.id])).rows;
    expect(await entries()).toEqual([
      { action: 'api_key.created', actor_label: p.email, has_ip: true },
      { action: 'invitation.accepted', actor_label: p.email, has_ip: true },
      { action: 'auth.login', actor_label: p.email, has_ip: true },
    ]);

    const otherOrganizations = async () => [await organizationRows(b.id), await organizationRows(unrelated.id)];
    const othersBefore = await otherOrganizations();
    await pg.query(`UPDATE erasure_requests SET completed_at = completed_at - interval '15 minutes' WHERE id = $1`, [filed.id]);
    await runMaintenanceJob(deps, undefined as never, 'erasure');
    // The person's other organization and an unrelated one: untouched.
    expect(await otherOrganizations()).toEqual(othersBefore);
    expect(await entries()).toEqual([
      { action: 'api_key.created', actor_label: filed.pseudonym.email, has_ip: false },
      { action: 'invitation.accepted', actor_label: p.email, has_ip: true },
      { action: 'auth.login', actor_label: p.email, has_ip: true },
    ]);
    expect((await read(filed.id, a.owner.token)).receipt.late_audit_entries_scrubbed).toBe(1);
  });

  it('a person invited back within the 15 minutes: what their erased API key and share grant record after the rejoin is scrubbed; what their new key records is not', async () => {
    // An admin of A (who may mint keys) and a member of B: A's erasure keeps the account.
    const a = await createOrg(h);
    const b = await createOrg(h);
    const p = await member(a, 'Rae Rejoin', undefined, 'admin');
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: b.id, userId: p.id, role: 'member', createdAt: new Date(Date.now() + 1000) } });
    await createKey(h, p.token, ['projects:read']);
    const [oldKey] = (await pg.query(`SELECT id, display_prefix FROM api_keys WHERE organization_id = $1 AND user_id = $2`, [a.id, p.id])).rows;
    const { report } = await traces(a, ['nothing of theirs'], { shareTo: p.email });
    const grant = await h.deps.prisma.reportShare.findFirstOrThrow({ where: { organizationId: a.id, reportId: report.id } });
    const [filed] = await confirmedErasures(p.id, a);
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 1, failed: 0 });

    // A's owner invites the same account again (as admin); they accept, sign in there and mint a key of their own.
    expect((await api().post('/api/v1/invitations').set(bearer(a.owner.token)).send({ email: p.email, role: 'admin' })).status).toBe(201);
    const token = /accept-invite\?token=([A-Za-z0-9_-]+)/.exec(h.mail().filter((m) => m.to === p.email).pop()!.text)![1];
    expect((await api().post('/api/v1/invitations/accept').send({ token, password: TEST_PASSWORD })).status).toBe(200);
    const signedIn = await loginRequest(h, { email: p.email, password: TEST_PASSWORD, organization_id: a.id });
    expect(signedIn.status).toBe(200);
    const minted = await api().post('/api/v1/api-keys').set(bearer(signedIn.body.token)).send({ name: 'after rejoining', scopes: ['projects:read'], current_password: TEST_PASSWORD });
    expect(minted.status).toBe(201);
    const newKey = (await pg.query(`SELECT id, display_prefix FROM api_keys WHERE id = $1`, [minted.body.id])).rows[0];

    // After the rejoin: requests authenticated with the erased key and the revoked grant before the erasure (or the
    // key still cached by an API instance the erasure's message did not reach) record their changes; so does the new key.
    const meta = { ip: '203.0.113.10', userAgent: 'late-client/1.0' };
    const asKey = (key: { id: string; display_prefix: string }): Principal =>
      ({ kind: 'api_key', userId: p.id, organizationId: a.id, role: 'admin', scopes: new Set(), apiKeyId: key.id, apiKeyPrefix: key.display_prefix });
    await recordAs(h.deps.prisma, asKey(oldKey), meta, new Date(), { action: 'source.uploaded', target: { type: 'assessment', id: newId('asm') } });
    await sleep(5);
    await recordInOrganizations(h.deps.prisma, [a.id], { type: 'report_share', id: grant.id, label: p.email }, meta, new Date(), {
      action: 'report.share_downloaded',
      target: { type: 'report', id: report.id },
    });
    await sleep(5);
    await recordAs(h.deps.prisma, asKey(newKey), meta, new Date(), { action: 'source.uploaded', target: { type: 'assessment', id: newId('asm') } });
    const [{ completed_at: completedAt }] = (await pg.query(`SELECT completed_at::text AS completed_at FROM erasure_requests WHERE id = $1`, [filed!.id])).rows;
    const entries = async () =>
      (await pg.query(
        `SELECT actor_type, actor_id, action, actor_label, ip IS NOT NULL AS has_ip FROM audit_events
          WHERE organization_id = $1 AND actor_id IN ($2, $3, $4, $5) AND created_at > $6::timestamp ORDER BY created_at, action`,
        [a.id, p.id, oldKey.id, newKey.id, grant.id, completedAt],
      )).rows;
    expect(await entries()).toEqual([
      { actor_type: 'user', actor_id: p.id, action: 'invitation.accepted', actor_label: p.email, has_ip: true },
      { actor_type: 'user', actor_id: p.id, action: 'auth.login', actor_label: p.email, has_ip: true },
      { actor_type: 'user', actor_id: p.id, action: 'api_key.created', actor_label: p.email, has_ip: true },
      { actor_type: 'api_key', actor_id: oldKey.id, action: 'source.uploaded', actor_label: oldKey.display_prefix, has_ip: true },
      { actor_type: 'report_share', actor_id: grant.id, action: 'report.share_downloaded', actor_label: p.email, has_ip: true },
      { actor_type: 'api_key', actor_id: newKey.id, action: 'source.uploaded', actor_label: newKey.display_prefix, has_ip: true },
    ]);

    await pg.query(`UPDATE erasure_requests SET completed_at = completed_at - interval '15 minutes' WHERE id = $1`, [filed!.id]);
    await runMaintenanceJob(deps, undefined as never, 'erasure');
    expect(await entries()).toEqual([
      { actor_type: 'user', actor_id: p.id, action: 'invitation.accepted', actor_label: p.email, has_ip: true },
      { actor_type: 'user', actor_id: p.id, action: 'auth.login', actor_label: p.email, has_ip: true },
      { actor_type: 'user', actor_id: p.id, action: 'api_key.created', actor_label: p.email, has_ip: true },
      { actor_type: 'api_key', actor_id: oldKey.id, action: 'source.uploaded', actor_label: oldKey.display_prefix, has_ip: false },
      { actor_type: 'report_share', actor_id: grant.id, action: 'report.share_downloaded', actor_label: filed!.pseudonym.email, has_ip: false },
      { actor_type: 'api_key', actor_id: newKey.id, action: 'source.uploaded', actor_label: newKey.display_prefix, has_ip: true },
    ]);
    expect((await read(filed!.id, a.owner.token)).receipt.late_audit_entries_scrubbed).toBe(2);
  });

  it('a follow-up held up past 5 s (a long scan; rows another transaction holds) completes, and the requests after it are followed up in the same run', async () => {
    const first = await inTwoErasedByA();
    const second = await inTwoErasedByA();
    for (let i = 0; i < 3 && (await read(second.filed.id, second.a.owner.token)).status !== 'completed'; i++) await runErasures(deps);
    for (const r of [first, second]) expect((await read(r.filed.id, r.a.owner.token)).status).toBe('completed');
    const meta = { ip: '203.0.113.8', userAgent: 'late-client/1.0' };
    const lateIds: string[] = [];
    for (const r of [first, second]) {
      const underWay: Principal = { kind: 'session', userId: r.p.id, organizationId: r.a.id, role: 'member', scopes: new Set(), sessionId: r.p.sessionId };
      await recordAs(h.deps.prisma, underWay, meta, new Date(), { action: 'api_key.created', target: { type: 'api_key', id: newId('key') } });
      const [{ id }] = (await pg.query(`SELECT id FROM audit_events WHERE organization_id = $1 AND actor_id = $2 AND ip IS NOT NULL`, [r.a.id, r.p.id])).rows;
      lateIds.push(id);
    }
    // Both due, the first one first.
    await pg.query(`UPDATE erasure_requests SET completed_at = completed_at - interval '16 minutes' WHERE id = $1`, [first.filed.id]);
    await pg.query(`UPDATE erasure_requests SET completed_at = completed_at - interval '15 minutes' WHERE id = $1`, [second.filed.id]);

    // Another transaction holds the first person's late entry for 6 s (as another worker's erasure batch in the same
    // organization can, for up to its 60 s): the follow-up's scrub waits for it, as it would on a long scan.
    const holder = new Client({ connectionString: database.url });
    await holder.connect();
    let job: Promise<unknown> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM audit_events WHERE id = $1 FOR UPDATE', [lateIds[0]]);
      const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      job = runMaintenanceJob(deps, undefined as never, 'erasure');
      job.catch(() => undefined);
      await until('the follow-up waits for the held entry', async () => (await blockedBy(pid)) > 0);
      await sleep(6000);
      await holder.query('COMMIT');
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    await expect(job).resolves.toBeDefined();
    for (const r of [first, second]) {
      expect((await read(r.filed.id, r.a.owner.token)).receipt.late_audit_entries_scrubbed).toBe(1);
      expect((await pg.query(`SELECT count(*)::int AS n FROM audit_events WHERE organization_id = $1 AND actor_id = $2 AND ip IS NOT NULL`, [r.a.id, r.p.id])).rows[0].n).toBe(0);
    }
  }, 60_000);

  it('an API key minted by a request under way as the person, written after the erasure took them out, is not left live there', async () => {
    // An admin (who may mint keys) of A and a member of B: A's erasure keeps the account.
    const a = await createOrg(h);
    const b = await createOrg(h);
    const p = await member(a, 'Kim Keymaker', undefined, 'admin');
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: b.id, userId: p.id, role: 'member', createdAt: new Date(Date.now() + 1000) } });
    await confirmedErasures(p.id, a);
    // The key's write waits for A's row (its foreign key) while the erasure runs as far as it can.
    const { result, answer } = await signInStraddlingTheErasure(a.id, () =>
      api().post('/api/v1/api-keys').set(bearer(p.token)).send({ name: 'minted in flight', scopes: ['projects:read'], current_password: TEST_PASSWORD }).then((r) => r),
    );
    expect(result).toEqual({ previewed: 0, completed: 1, failed: 0 });
    // Minted while the person was still a member (the erasure waited for it), then revoked with their other keys.
    expect(answer.status).toBe(201);
    expect((await pg.query(`SELECT revoked_reason FROM api_keys WHERE id = $1`, [answer.body.id])).rows).toEqual([{ revoked_reason: 'member_erased' }]);
    expect((await pg.query(`SELECT count(*)::int AS n FROM api_keys WHERE organization_id = $1 AND user_id = $2 AND revoked_at IS NULL`, [a.id, p.id])).rows[0].n).toBe(0);
  });

  /** A member of A only, whose erasure by A (which erases the account) is confirmed, with a pending invitation to B. */
  async function invitedElsewhere(name: string) {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const p = await member(a, name);
    const [filed] = await confirmedErasures(p.id, a);
    const token = `inv-${uniqueSuffix()}`;
    const invitation = await h.deps.prisma.invitation.create({
      data: { id: newId('inv'), organizationId: b.id, email: p.email, role: 'member', tokenHash: sha256Hex(token), invitedById: b.admin.id, expiresAt: new Date(Date.now() + 86400_000) },
    });
    const accept = () => api().post('/api/v1/invitations/accept').send({ token, password: TEST_PASSWORD }).then((r) => r);
    return { a, b, p, filed: filed!, invitation, accept };
  }

  it('an invitation accepted as the account the erasure then erases (its password checked before, its membership written after) joins nothing', async () => {
    const { a, b, p, filed, invitation } = await invitedElsewhere('Ines Inflight');
    // What POST /invitations/accept has read and checked (the account, its password) before the erasure...
    const checked = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: p.id } });
    expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 1, failed: 0 });
    expect((await read(filed.id, a.owner.token)).receipt.account_erased).toBe(true);
    // ...and its transaction, after it.
    await expect(joinInvitedOrganization({ prisma: h.deps.prisma, clock: h.clock }, invitation, { existing: checked }, { ip: '203.0.113.9' })).rejects.toMatchObject({ status: 409 });
    expect(await h.deps.prisma.membership.count({ where: { userId: p.id } })).toBe(0);
    expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: b.id, actorId: p.id } })).toBe(0);
    // The invitation still admits the address (a new account now: the erased one no longer holds it).
    expect((await h.deps.prisma.invitation.findUniqueOrThrow({ where: { id: invitation.id } })).acceptedAt).toBeNull();
  });

  it('an invitation accepted while the erasure reaches its account step: the account stays (it belongs to another organization now) and signs in', async () => {
    const { a, b, p, filed, accept } = await invitedElsewhere('Otto Overlap');
    // The erasure taken, one step a run, up to its account step: the person has left A, the account is still theirs.
    const step = async () => (await pg.query(`SELECT progress->>'step' AS step FROM erasure_requests WHERE id = $1`, [filed.id])).rows[0].step;
    for (let i = 0; i < 50 && (await step()) !== 'account'; i++) await runErasures(deps, 0);
    expect(await step()).toBe('account');
    // B's row held: the accept waits to write its membership (the foreign key), its transaction open.
    const { result, answer } = await whileRowHeld('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [b.id], accept);
    expect(result).toEqual({ previewed: 0, completed: 1, failed: 0 });
    expect(answer.status).toBe(200);
    expect((await read(filed.id, a.owner.token)).receipt.account_erased).toBe(false);
    expect(await h.deps.prisma.membership.findMany({ where: { userId: p.id }, select: { organizationId: true } })).toEqual([{ organizationId: b.id }]);
    await expectLogsIn(p);
  });

  it('an OAuth sign-in that links its provider account by address while the account is erased links nothing to the erased account', async () => {
    const a = await createOrg(h);
    const p = await member(a, 'Gus Google');
    const [filed] = await confirmedErasures(p.id, a);
    const step = async () => (await pg.query(`SELECT progress->>'step' AS step FROM erasure_requests WHERE id = $1`, [filed!.id])).rows[0].step;
    for (let i = 0; i < 50 && (await step()) !== 'account'; i++) await runErasures(deps, 0);
    expect(await step()).toBe('account');
    await h.deps.prisma.$transaction((tx) => recordSecurityNotice(tx, { userId: p.id, notice: { kind: 'password_changed' }, ip: null, at: new Date() }));
    const identity = { provider: 'google' as const, subject: `g-${uniqueSuffix()}`, email: p.email, name: 'Gus Google' };

    // The account step held inside, after it took the person's row (its security notices, deleted after, are held).
    const holder = new Client({ connectionString: database.url });
    await holder.connect();
    let signedIn: Promise<{ id: string }> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM security_notices WHERE user_id = $1 FOR UPDATE', [p.id]);
      const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      const run = runErasures(deps);
      run.catch(() => undefined);
      await until('the account step waits inside', async () => (await blockedBy(pid)) > 0);
      // The callback finds the account by the address it still has, and links the identity to it (waiting for the row).
      signedIn = userForIdentity(h.deps, identity, { ip: '203.0.113.10' });
      signedIn.catch(() => undefined);
      await until('the link waits for the erasure', async () => (await lockWaiters()) >= 2);
      await holder.query('COMMIT');
      expect(await run).toEqual({ previewed: 0, completed: 1, failed: 0 });
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    await expect(signedIn).rejects.toMatchObject({ status: 409 });
    expect((await read(filed!.id, a.owner.token)).receipt.account_erased).toBe(true);
    expect(await h.deps.prisma.oAuthIdentity.count({ where: { OR: [{ userId: p.id }, { subject: identity.subject }] } })).toBe(0);
    // Signing in again with that provider account makes a new account: the erased one no longer has the address.
    expect((await userForIdentity(h.deps, identity, {})).id).not.toBe(p.id);
  });
});
