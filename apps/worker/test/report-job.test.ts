// Report rendering end to end: a report requested through the API is rendered by the in-process worker into a
// real PDF (checked with poppler's pdftotext: assessment, project, counts by severity, every finding), stored,
// downloadable, and announced once by report.ready (delivered, signed); the relay picks up a report whose enqueue
// was lost; a report whose rendering keeps failing, or whose worker keeps dying during it, ends `failed`; a render job waits (delayed, no attempt) while an
// erasure runs in the organization.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DelayedError, type Job } from 'bullmq';
import { verifySignature } from '@svc/webhooks';
import { createRedis, createReportQueue, enqueueReport, type ReportJobData } from '@svc/queue';
import { relayPendingReports } from '@svc/outbox';
import { bearer, insertProject } from '../../api/test/support/fixtures';
import { eventsOf, insertAssessmentIn, insertFinding } from '../../api/test/support/domain';
import { newId } from '@svc/db';
import * as renderModule from '../src/reports/render-pdf';
import { RendersUnderWay, relayLostReports, releaseRendersCutOff, renderReport, runReportJob } from '../src/reports/report-job';
import { startWorker } from '../src/worker';
import { createWorld, poll, type CreatedSubscription, type World } from './support/world';

let w: World;
let sub: CreatedSubscription;

beforeAll(async () => {
  w = await createWorld();
  sub = await w.subscribe({ name: 'reports', url: w.receiver.url('/reports'), events: ['report.ready'] });
});
afterAll(() => w?.close());

/** supertest parser keeping the raw bytes of a binary body. */
function binaryParser(res: { on(event: string, listener: (chunk?: Buffer) => void): unknown }, done: (err: Error | null, body: Buffer) => void) {
  const chunks: Buffer[] = [];
  res.on('data', (c) => chunks.push(c!));
  res.on('end', () => done(null, Buffer.concat(chunks)));
}

function pdfToText(pdf: Buffer): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-report-'));
  const file = path.join(dir, 'report.pdf');
  writeFileSync(file, pdf);
  return execFileSync('pdftotext', ['-layout', file, '-'], { encoding: 'utf8' });
}

const waitForStatus = (id: string, status: string) =>
  poll(
    () => w.h.deps.prisma.report.findUniqueOrThrow({ where: { id }, omit: { pdf: true } }),
    (r) => r.status === status,
    20_000,
    `report ${id} to be ${status}`,
  );

async function arrange() {
  const project = await insertProject(w.h, w.org.id, 'Storefront');
  const assessment = await insertAssessmentIn(w.h, w.org.id, project.id, 'completed', { name: 'Pentest Q3', startedAt: new Date(), finishedAt: new Date() });
  const findings = [
    await insertFinding(w.h, assessment, {
      severity: 'critical', title: 'SQL injection in login', status: 'confirmed', location: 'src/auth/login.ts:42',
      description: 'The e-mail parameter reaches a raw SQL query.',
    }),
    await insertFinding(w.h, assessment, { severity: 'high', title: 'Stored XSS in comments', location: 'src/comments/render.ts:7', description: 'Comment bodies are rendered without escaping.' }),
    await insertFinding(w.h, assessment, { severity: 'high', title: 'Missing CSRF token', status: 'fixed', location: 'src/forms.ts:3' }),
    await insertFinding(w.h, assessment, { severity: 'info', title: 'Verbose server banner', location: null, description: null }),
  ];
  return { project, assessment, findings };
}

describe('the render job', () => {
  it('renders a real PDF of the assessment, stores it, publishes report.ready once and delivers it signed', async () => {
    const { project, assessment, findings } = await arrange();
    const requested = await w.api().post(`/api/v1/assessments/${assessment.id}/reports`).set(bearer(w.org.admin.token)).send({ title: 'Storefront Q3 report' });
    expect(requested.status).toBe(202);
    const ready = await waitForStatus(requested.body.id, 'ready');
    expect(ready.sizeBytes).toBeGreaterThan(500);
    expect(ready.readyAt).not.toBeNull();

    const read = await w.api().get(`/api/v1/reports/${ready.id}`).set(bearer(w.org.admin.token));
    expect(read.body).toMatchObject({ status: 'ready', size_bytes: ready.sizeBytes, ready_at: ready.readyAt!.toISOString() });
    const download = await w.api().get(`/api/v1/reports/${ready.id}/download`).set(bearer(w.org.admin.token)).buffer(true).parse(binaryParser);
    expect(download.status).toBe(200);
    expect(download.headers['content-type']).toBe('application/pdf');
    expect(download.headers['content-disposition']).toBe('attachment; filename="Storefront-Q3-report.pdf"');
    const pdf = download.body as Buffer;
    expect(pdf.length).toBe(ready.sizeBytes);
    expect(pdf.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    expect(pdf.subarray(-6).toString('latin1')).toMatch(/%%EOF\s*$/);

    const text = pdfToText(pdf).replace(/[ \t]+/g, ' ');
    for (const expected of [
      'Storefront Q3 report', 'Project: Storefront', 'Assessment: Pentest Q3', assessment.id, project.id,
      'Total findings: 4', 'Critical: 1', 'High: 2', 'Medium: 0', 'Low: 0', 'Info: 1',
      'By status: confirmed 1, fixed 1, open 2',
      'SQL injection in login', 'src/auth/login.ts:42', 'The e-mail parameter reaches a raw SQL query.',
      'Stored XSS in comments', 'Comment bodies are rendered without escaping.', 'Missing CSRF token', 'Verbose server banner',
      'Severity: critical', 'Status: confirmed', 'Status: fixed', 'Location: -', 'No description.',
    ]) {
      expect(text).toContain(expected);
    }
    for (const f of findings) expect(text).toContain(f.id);
    // Most severe first.
    expect(text.indexOf('SQL injection in login')).toBeLessThan(text.indexOf('Stored XSS in comments'));
    expect(text.indexOf('Stored XSS in comments')).toBeLessThan(text.indexOf('Verbose server banner'));

    const events = await eventsOf(w.h, w.org.id, 'report.ready', { report_id: ready.id });
    expect(events).toHaveLength(1);
    const data = {
      report_id: ready.id,
      assessment_id: assessment.id,
      project_id: project.id,
      title: 'Storefront Q3 report',
      size_bytes: ready.sizeBytes,
      ready_at: ready.readyAt!.toISOString(),
    };
    expect(events[0].data).toEqual(data);

    const [received] = await w.receiver.waitForRequests('/reports', 1);
    expect(verifySignature(received.body, String(received.headers['x-service-signature']), sub.secret).ok).toBe(true);
    expect(JSON.parse(received.body.toString())).toMatchObject({ type: 'report.ready', data: { kind: 'report.ready', ...data } });

    // Rendering it again (a second worker, a retried job) changes and publishes nothing.
    expect(await renderReport(w.workerDeps, w.worker!.deliveryQueue, ready.id)).toBe('skipped');
    expect(await eventsOf(w.h, w.org.id, 'report.ready', { report_id: ready.id })).toHaveLength(1);
  });

  it('renders an assessment without findings, and text outside Latin-1 without failing', async () => {
    const project = await insertProject(w.h, w.org.id, 'Ünïcode プロジェクト');
    const assessment = await insertAssessmentIn(w.h, w.org.id, project.id, 'running', { name: 'Empty run' });
    const requested = await w.api().post(`/api/v1/assessments/${assessment.id}/reports`).set(bearer(w.org.admin.token)).send({ title: 'Résumé 漢字' });
    const ready = await waitForStatus(requested.body.id, 'ready');
    const { pdf } = await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: ready.id }, select: { pdf: true } });
    const text = pdfToText(Buffer.from(pdf!));
    expect(text).toContain('Resume ??');
    expect(text).toContain('Project: Unicode ?????');
    expect(text).toContain('No findings were recorded.');
    expect(text).toContain('Total findings: 0');
  });
});

describe('the report relay', () => {
  it('enqueues reports still pending after the relay age (their enqueue was lost), which then render', async () => {
    const { assessment } = await arrange();
    const old = new Date(Date.now() - w.h.config.webhooks.relayAgeMs - 1000);
    const lost = await w.h.deps.prisma.report.create({
      data: { id: newId('rpt'), organizationId: w.org.id, assessmentId: assessment.id, title: 'Lost enqueue', createdAt: old },
    });
    const fresh = await w.h.deps.prisma.report.create({
      data: { id: newId('rpt'), organizationId: w.org.id, assessmentId: assessment.id, title: 'Just requested' },
    });
    expect(await relayLostReports(w.workerDeps, w.worker!.reportQueue)).toBeGreaterThanOrEqual(1);
    await waitForStatus(lost.id, 'ready');
    expect((await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: fresh.id }, omit: { pdf: true } })).status).toBe('pending');
    expect(await eventsOf(w.h, w.org.id, 'report.ready', { report_id: lost.id })).toHaveLength(1);
    await w.h.deps.prisma.report.delete({ where: { id: fresh.id } });
  });

  it('finds a report that lost its job behind a page of reports whose jobs wait, and adds no second job for those', async () => {
    const { assessment } = await arrange();
    // A queue of its own that no worker takes from: the jobs put in it stay waiting, as behind a backlog.
    const connection = createRedis(w.h.config.redisUrl);
    const queue = createReportQueue(connection, { ...w.h.config, redisPrefix: `${w.h.config.redisPrefix}:relay-pages` });
    try {
      const old = new Date(Date.now() - w.h.config.webhooks.relayAgeMs - 1000);
      const ids = ['rpt_relaypage1', 'rpt_relaypage2', 'rpt_relaypage3', 'rpt_relaypage4', 'rpt_relaypage5'];
      await w.h.deps.prisma.report.createMany({
        data: ids.map((id) => ({ id, organizationId: w.org.id, assessmentId: assessment.id, title: id, createdAt: old })),
      });
      // The first four (two pages of two) still have their jobs; the last lost its own.
      for (const id of ids.slice(0, 4)) await enqueueReport(queue, id);
      const before = await Promise.all(ids.slice(0, 4).map(async (id) => (await queue.getJob(id))!.timestamp));

      const relayed = await relayPendingReports(w.h.deps.prisma, queue, { ageMs: w.h.config.webhooks.relayAgeMs, batchSize: 2 });
      expect(relayed).toBeGreaterThanOrEqual(1);
      expect(await queue.getJob(ids[4])).toMatchObject({ name: 'render', data: { reportId: ids[4] } });
      expect(await Promise.all(ids.slice(0, 4).map(async (id) => (await queue.getJob(id))!.timestamp))).toEqual(before);
      expect(await queue.getJobCounts('waiting')).toMatchObject({ waiting: 5 + relayed - 1 });
      await w.h.deps.prisma.report.deleteMany({ where: { id: { in: ids } } });
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    }
  });
});

describe('failures', () => {
  afterEach(() => jest.restoreAllMocks());

  it('retries a failed render, and marks the report failed after the last attempt (no event)', async () => {
    const { assessment } = await arrange();
    const report = await w.h.deps.prisma.report.create({
      data: { id: newId('rpt'), organizationId: w.org.id, assessmentId: assessment.id, title: 'Doomed' },
    });
    jest.spyOn(renderModule, 'renderReportPdf').mockRejectedValue(new Error('font table exploded'));
    const job = (attemptsMade: number) =>
      ({ name: 'render', data: { reportId: report.id }, attemptsMade, opts: { attempts: 3 } }) as unknown as Job<ReportJobData>;
    await expect(runReportJob(w.workerDeps, w.worker!.deliveryQueue, w.worker!.reportQueue, job(0))).rejects.toThrow('font table exploded');
    // A render that failed in order is not counted as one its worker died during.
    expect(await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: report.id }, omit: { pdf: true } })).toMatchObject({ status: 'pending', unfinishedRenders: 0 });
    expect(await runReportJob(w.workerDeps, w.worker!.deliveryQueue, w.worker!.reportQueue, job(2))).toBe('failed');
    const failed = await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: report.id }, omit: { pdf: true } });
    expect(failed).toMatchObject({ status: 'failed', error: 'The report could not be rendered.', sizeBytes: null });
    const read = await w.api().get(`/api/v1/reports/${report.id}`).set(bearer(w.org.admin.token));
    expect(read.body).toMatchObject({ status: 'failed', error: 'The report could not be rendered.' });
    expect(read.body.error).not.toContain('font table');
    expect((await w.api().get(`/api/v1/reports/${report.id}/download`).set(bearer(w.org.admin.token))).status).toBe(409);
    expect(await eventsOf(w.h, w.org.id, 'report.ready', { report_id: report.id })).toEqual([]);
  });

  it('marks failed, without rendering it again, a report whose render never finished three times (its worker died during each)', async () => {
    const { assessment } = await arrange();
    const report = await w.h.deps.prisma.report.create({
      data: { id: newId('rpt'), organizationId: w.org.id, assessmentId: assessment.id, title: 'Kills its worker' },
    });
    // A render that never returns stands for a worker killed during it (out of memory on this PDF, say): nothing
    // after it runs, neither the job's handler nor its clean-up. Stall recovery then moves the job on without the
    // handler, and the relay enqueues the pending report again.
    const killed: Array<(err: Error) => void> = [];
    const render = jest.spyOn(renderModule, 'renderReportPdf').mockImplementation(() => new Promise((_resolve, reject) => killed.push(reject)));
    const job = { name: 'render', data: { reportId: report.id }, attemptsMade: 0, opts: { attempts: 3 } } as unknown as Job<ReportJobData>;
    const run = () => runReportJob(w.workerDeps, w.worker!.deliveryQueue, w.worker!.reportQueue, job);
    const abandoned: Array<Promise<unknown>> = [];
    for (let started = 1; started <= 3; started++) {
      abandoned.push(run().catch(() => undefined));
      await poll(async () => render.mock.calls.length, (calls) => calls === started, 10_000, `render ${started} to start`);
    }
    expect(await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: report.id }, omit: { pdf: true } })).toMatchObject({ status: 'pending', unfinishedRenders: 3 });

    expect(await run()).toBe('failed');
    expect(render).toHaveBeenCalledTimes(3);
    expect(await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: report.id }, omit: { pdf: true } })).toMatchObject({
      status: 'failed',
      error: 'The report could not be rendered.',
    });
    // Not pending any more: the relay leaves it alone however old it is.
    await w.h.deps.prisma.report.update({ where: { id: report.id }, data: { createdAt: new Date(Date.now() - w.h.config.webhooks.relayAgeMs - 1000) } });
    await relayLostReports(w.workerDeps, w.worker!.reportQueue);
    expect(await w.worker!.reportQueue.getJob(report.id)).toBeUndefined();
    expect(await eventsOf(w.h, w.org.id, 'report.ready', { report_id: report.id })).toEqual([]);

    for (const reject of killed) reject(new Error('the process was killed'));
    await Promise.all(abandoned);
  });

  it('a report that renders after its worker died twice is ready with nothing counted against it (a later render, after an erasure, starts afresh)', async () => {
    const { assessment } = await arrange();
    const report = await w.h.deps.prisma.report.create({
      data: { id: newId('rpt'), organizationId: w.org.id, assessmentId: assessment.id, title: 'Survivor', unfinishedRenders: 2 },
    });
    const job = { name: 'render', data: { reportId: report.id }, attemptsMade: 0, opts: { attempts: 3 } } as unknown as Job<ReportJobData>;
    expect(await runReportJob(w.workerDeps, w.worker!.deliveryQueue, w.worker!.reportQueue, job)).toBe('ready');
    expect(await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: report.id }, omit: { pdf: true } })).toMatchObject({ status: 'ready', unfinishedRenders: 0 });
  });

  it('a render that failed with a database blip, or was cut off by a shutdown, is not counted as one its worker died during', async () => {
    const { assessment } = await arrange();
    const report = await w.h.deps.prisma.report.create({
      data: { id: newId('rpt'), organizationId: w.org.id, assessmentId: assessment.id, title: 'Blips and deploys' },
    });
    const counted = async () => (await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: report.id }, omit: { pdf: true } })).unfinishedRenders;
    const job = { name: 'render', data: { reportId: report.id }, attemptsMade: 0, opts: { attempts: 3 } } as unknown as Job<ReportJobData>;

    // 1. The render fails, and so does the first try at recording its end (the database was restarting).
    jest.spyOn(renderModule, 'renderReportPdf').mockRejectedValue(new Error('connection reset'));
    let blips = 1;
    const prisma = new Proxy(w.workerDeps.prisma, {
      get(target, key, receiver) {
        if (key === '$executeRaw') {
          return (...args: unknown[]) => {
            if (blips-- > 0) return Promise.reject(new Error('Can\'t reach database server'));
            return (target.$executeRaw as (...a: unknown[]) => Promise<number>)(...args);
          };
        }
        return Reflect.get(target, key, receiver);
      },
    });
    await expect(runReportJob({ ...w.workerDeps, prisma }, w.worker!.deliveryQueue, w.worker!.reportQueue, job)).rejects.toThrow('connection reset');
    expect(blips).toBe(-1);
    expect(await counted()).toBe(0);

    // 2. A worker stopped while its render runs, past its shutdown deadline: cut off by the deploy, not killed by it.
    const killed: Array<(err: Error) => void> = [];
    const render = jest.spyOn(renderModule, 'renderReportPdf').mockImplementation(() => new Promise((_resolve, reject) => killed.push(reject)));
    render.mockClear();
    // A worker of its own (its own queue prefix: this file's worker does not take the job), stopped after 300 ms.
    const config = { ...w.workerDeps.config, workerShutdownTimeoutMs: 300, redisPrefix: `${w.workerDeps.config.redisPrefix}:cut` };
    const stopping = await startWorker({ ...w.workerDeps, config }, { schedule: false });
    try {
      await enqueueReport(stopping.reportQueue, report.id);
      await poll(async () => render.mock.calls.length, (calls) => calls === 1, 10_000, 'the render to start');
      expect(await counted()).toBe(1);
      await stopping.close();
      expect(await counted()).toBe(0);
      // The render it cut off ends later (the process would have exited): counted once, not twice.
      await w.h.deps.prisma.report.update({ where: { id: report.id }, data: { unfinishedRenders: 2 } });
      for (const reject of killed) reject(new Error('cut off'));
      await new Promise((r) => setTimeout(r, 300));
      expect(await counted()).toBe(2);
    } finally {
      for (const reject of killed) reject(new Error('cut off'));
      await stopping.close();
      await w.h.deps.prisma.report.delete({ where: { id: report.id } });
    }
  }, 60_000);

  it('two runs of one report at once in one worker each end once; a stopping worker hands a new job back; its release does not wait on a hung database', async () => {
    const { assessment } = await arrange();
    const report = await w.h.deps.prisma.report.create({
      data: { id: newId('rpt'), organizationId: w.org.id, assessmentId: assessment.id, title: 'Twice at once' },
    });
    const counted = async () => (await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: report.id }, omit: { pdf: true } })).unfinishedRenders;
    const moveToDelayed = jest.fn(async () => undefined);
    const job = { name: 'render', data: { reportId: report.id }, attemptsMade: 0, opts: { attempts: 3 }, moveToDelayed } as unknown as Job<ReportJobData>;
    const underWay = new RendersUnderWay();
    const run = () => runReportJob(w.workerDeps, w.worker!.deliveryQueue, w.worker!.reportQueue, job, 'token', underWay);

    // Its lock lost while a render blocked the event loop, the same worker takes the job again: two runs at once.
    jest.spyOn(renderModule, 'renderReportPdf').mockRejectedValue(new Error('font table exploded'));
    expect((await Promise.allSettled([run(), run()])).map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(await counted()).toBe(0);

    // Once the worker has begun to stop, a job BullMQ still hands over goes back untouched: not started, not counted.
    underWay.stopTaking();
    await expect(run()).rejects.toThrow(DelayedError);
    expect(moveToDelayed).toHaveBeenCalledTimes(1);
    expect(await counted()).toBe(0);

    // The shutdown's release gives up on a database that does not answer, within its bound.
    underWay.begin(report.id);
    const hung = new Proxy(w.workerDeps.prisma, {
      get: (target, key, receiver) => (key === '$executeRaw' ? () => new Promise(() => undefined) : Reflect.get(target, key, receiver)),
    });
    const started = Date.now();
    await releaseRendersCutOff({ ...w.workerDeps, prisma: hung }, underWay);
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 30_000);

  it('skips a report whose assessment was deleted meanwhile', async () => {
    expect(await renderReport(w.workerDeps, w.worker!.deliveryQueue, 'rpt_gone')).toBe('skipped');
  });
});

describe('an erasure running in the organization', () => {
  it.each([
    ['erasing', undefined, 'free_text:findings'],
    // Failed amid its free-text passes: its retry resumes where it stopped, behind what it already passed.
    ['failed amid its free-text passes', 'failed', 'free_text:findings'],
    // Failed at its reports step: that step finds the PDFs by the pseudonym, which one stored now would not hold.
    ['failed at its reports step', 'failed', 'reports'],
  ])('%s: holds the render job back (delayed, no attempt spent, nothing stored) until it has ended; then the report renders', async (_what, failed, step) => {
    const { assessment } = await arrange();
    const erasure = await w.h.deps.prisma.erasureRequest.create({
      data: {
        id: newId('era'), organizationId: w.org.id, subjectEmailKey: 'held-report-subject', status: failed ?? 'erasing',
        pseudonymName: 'Erased person 1', pseudonymEmail: 'erased-1@erased.invalid', confirmedAt: new Date(),
        progress: { step, cursor: null, counts: {}, receipt: {} },
      },
    });
    try {
      const requested = await w.api().post(`/api/v1/assessments/${assessment.id}/reports`).set(bearer(w.org.admin.token)).send({ title: 'Held report' });
      expect(requested.status).toBe(202);
      const held = await poll(
        async () => {
          const job = await w.worker!.reportQueue.getJob(requested.body.id);
          return job ? { job, state: await job.getState() } : null;
        },
        (found) => found?.state === 'delayed',
        20_000,
        'the render job to be delayed',
      );
      const job = held!.job;
      expect(job.attemptsMade).toBe(0);
      expect(await w.h.deps.prisma.report.findUniqueOrThrow({ where: { id: requested.body.id }, omit: { pdf: true } })).toMatchObject({ status: 'pending' });
      expect(await eventsOf(w.h, w.org.id, 'report.ready', { report_id: requested.body.id })).toHaveLength(0);

      await w.h.deps.prisma.erasureRequest.update({ where: { id: erasure.id }, data: { status: 'completed', completedAt: new Date() } });
      await job.promote();
      await waitForStatus(requested.body.id, 'ready');
      expect(await eventsOf(w.h, w.org.id, 'report.ready', { report_id: requested.body.id })).toHaveLength(1);
    } finally {
      await w.h.deps.prisma.erasureRequest.updateMany({ where: { id: erasure.id, status: { in: ['erasing', 'failed'] } }, data: { status: 'completed', completedAt: new Date() } });
    }
  });
});
