// Issue 34, part 5: secrets at rest and in mail. A chat webhook URL (whoever has one can post) is sealed at rest:
// neither the raw column nor a pg_dump shows it, rows stored in plain text before are sealed by the start-up step
// and delivered meanwhile; an e-mail target's message hides its recipients from each other (Bcc); a failing e-mail
// target's health mail reaches the organization's owner and admins. Real worker, real receiver, real mail outbox.
import { execFileSync } from 'node:child_process';
import { createMailer, type Mailer } from '@svc/mail';
import { sealPlainChatUrls } from '@svc/db';
import { bearer } from '../../api/test/support/fixtures';
import { startWorker } from '../src/worker';
import { createWorld, poll, type World } from './support/world';

const TARGETS = '/api/v1/notification-targets';
const SECRET_PATH = '/services/T0AAA/B0BBB/xoxSecretWebhookPath42';

async function createTarget(w: World, body: Record<string, unknown>) {
  const res = await w.api().post(TARGETS).set(bearer(w.org.admin.token)).send(body);
  if (res.status !== 201) throw new Error(`Creating a target answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body as { id: string; url_host: string };
}

/** The stored columns as a database reader (or a backup) sees them. */
async function rawColumns(w: World, id: string) {
  const [row] = await w.h.deps.prisma.$queryRaw<Array<{ url: string; url_enc: string | null }>>`SELECT url, url_enc FROM webhook_subscriptions WHERE id = ${id}`;
  return row;
}

function pgDumpOfSubscriptions(w: World): string {
  const url = new URL(w.h.config.databaseUrl);
  return execFileSync('pg_dump', ['--data-only', '--table=webhook_subscriptions', '-h', url.hostname, '-p', url.port || '5432', '-U', decodeURIComponent(url.username), url.pathname.slice(1)], {
    encoding: 'utf8',
    env: { ...process.env, PGPASSWORD: decodeURIComponent(url.password) },
  });
}

describe('chat webhook URLs at rest', () => {
  let w: World;
  beforeAll(async () => {
    w = await createWorld();
  });
  afterAll(() => w?.close());

  it('seals the URL: the raw column and a pg_dump show only the origin, the message still reaches the whole URL', async () => {
    const url = w.receiver.url(SECRET_PATH);
    const target = await createTarget(w, { kind: 'slack', name: 'chat', url, events: ['report.ready'] });
    expect(target.url_host).toBe(new URL(url).host);

    const raw = await rawColumns(w, target.id);
    expect(raw.url).toBe(new URL(url).origin);
    expect(raw.url_enc).toMatch(/^v1\./);
    expect(JSON.stringify(raw)).not.toContain('xoxSecretWebhookPath42');
    expect(pgDumpOfSubscriptions(w)).not.toContain('xoxSecretWebhookPath42');

    const delivery = await w.publishTo(target.id, { type: 'report.ready', data: { report_id: 'rpt_sealed' } });
    expect(delivery.status).toBe('succeeded');
    expect(w.receiver.requests(SECRET_PATH)).toHaveLength(1);
  });

  it('a row stored in plain text before is delivered meanwhile, then sealed once by the start-up step', async () => {
    const path = `${SECRET_PATH}/legacy`;
    const url = w.receiver.url(path);
    const target = await createTarget(w, { kind: 'teams', name: 'legacy', url, events: ['report.ready'] });
    // As a row written before url_enc existed: the whole URL in plain text.
    await w.h.deps.prisma.$executeRaw`UPDATE webhook_subscriptions SET url = ${url}, url_enc = NULL WHERE id = ${target.id}`;
    expect(pgDumpOfSubscriptions(w)).toContain('xoxSecretWebhookPath42/legacy');
    expect((await w.publishTo(target.id, { type: 'report.ready', data: { report_id: 'rpt_plain' } })).status).toBe('succeeded');

    expect(await sealPlainChatUrls(w.h.deps.prisma, w.h.config.encryptionKey)).toBe(1);
    expect(await sealPlainChatUrls(w.h.deps.prisma, w.h.config.encryptionKey)).toBe(0);
    expect((await rawColumns(w, target.id)).url).toBe(new URL(url).origin);
    expect(pgDumpOfSubscriptions(w)).not.toContain('xoxSecretWebhookPath42');
    const shown = await w.api().get(`${TARGETS}/${target.id}`).set(bearer(w.org.admin.token));
    expect(shown.body.url_host).toBe(new URL(url).host);

    expect((await w.publishTo(target.id, { type: 'report.ready', data: { report_id: 'rpt_resealed' } })).status).toBe('succeeded');
    expect(w.receiver.requests(path)).toHaveLength(2);
  });

  it('leaves webhook subscriptions and e-mail targets alone', async () => {
    const sub = await w.subscribe({ name: 'hook', url: w.receiver.url('/plain-webhook'), events: ['report.ready'] });
    const email = await createTarget(w, { kind: 'email', name: 'mail', recipients: ['a@example.com'], events: ['report.ready'] });
    await sealPlainChatUrls(w.h.deps.prisma, w.h.config.encryptionKey);
    expect(await rawColumns(w, sub.id)).toEqual({ url: w.receiver.url('/plain-webhook'), url_enc: null });
    expect(await rawColumns(w, email.id)).toEqual({ url: '', url_enc: null });
  });
});

describe('e-mail targets', () => {
  let w: World;
  beforeAll(async () => {
    // One attempt per delivery and failing after one terminal failure: the health mail comes with the first failure.
    w = await createWorld({ worker: false, env: { WEBHOOK_MAX_ATTEMPTS: '1', WEBHOOK_FAILING_AFTER_FAILURES: '1' } });
    const outbox = createMailer(w.h.config.mail);
    // The mail server refuses the target's recipients (one Bcc'd message); other mail (the health mail) goes out.
    const refusingTargets: Mailer = {
      send: (message) => (message.bcc?.some((to) => to.endsWith('@refused.example')) ? Promise.reject(new Error('550 recipients refused')) : outbox.send(message)),
    };
    w.worker = await startWorker({ ...w.workerDeps, mailer: refusingTargets }, { schedule: false });
  });
  afterAll(() => w?.close());

  it('sends one message with every recipient in Bcc, never in one To: header', async () => {
    const target = await createTarget(w, { kind: 'email', name: 'team', recipients: ['ann@example.com', 'bob@other.example', 'cy@example.com'], events: ['report.ready'] });
    const before = w.h.mail().length;
    expect((await w.publishTo(target.id, { type: 'report.ready', data: { report_id: 'rpt_bcc' } })).status).toBe('succeeded');
    const mails = w.h.mail().slice(before);
    expect(mails).toHaveLength(1);
    expect(mails[0].bcc).toEqual(['ann@example.com', 'bob@other.example', 'cy@example.com']);
    expect(mails[0].to).toBeUndefined();
  });

  it("mails a failing e-mail target's owner and admins (no recipient address, no URL)", async () => {
    const target = await createTarget(w, { kind: 'email', name: 'refused team', recipients: ['x@refused.example', 'y@refused.example'], events: ['report.ready'] });
    const delivery = await w.publishTo(target.id, { type: 'report.ready', data: { report_id: 'rpt_refused' } });
    expect(delivery.status).toBe('failed');
    expect((await w.subscription(target.id)).status).toBe('failing');
    const mails = await poll(
      async () => w.h.mail().filter((m) => m.text.includes(target.id)),
      (found) => found.length >= 2,
      10_000,
      'the health e-mails',
    );
    expect(mails.map((m) => m.to).sort()).toEqual([w.org.owner.email, w.org.admin.email].sort());
    expect(mails[0].subject).toBe(`E-mail notification target "refused team" of ${w.org.name} is failing`);
    expect(mails[0].text).toContain('Recipients: 2 e-mail addresses');
    expect(mails[0].text).toContain('/notification-targets');
    expect(mails[0].text).not.toContain('refused.example');
  });
});
