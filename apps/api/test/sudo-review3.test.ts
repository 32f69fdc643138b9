// Review of sudo mode for notification targets and report shares, and of "a name is one line of text": the ways
// around them an attacker would try. A report's title is a name too (it is mailed to an outside address when the
// report is shared), and a name a sign-in provider hands us never went through name().
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { insertAssessmentIn, insertReadyReport } from './support/domain';
import { resetLinkFor } from './support/auth-helpers';
import { githubEnvFor, startGithubServer, type LoopbackGithub } from './support/oauth-github';
import { APP_BASE_URL, callback, redirectUriOf, startFlow } from './support/oauth-flow';

/** A line of its own a forged title or name would write into a mail: what must never start a line. */
const FORGED = 'Your account is locked: sign in again at https://evil.example/login';
const LINE_BREAKS = ['\n', '\r\n', '\u2028', '\u0085'];

describe('a report title is one line of text', () => {
  let h: Harness;
  let org: TestOrg;
  let assessment: { id: string };

  beforeAll(async () => {
    h = await createHarness();
    org = await createOrg(h);
    assessment = await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed');
  });
  afterAll(() => h.close());

  const reportsOf = () => h.deps.prisma.report.findMany({ where: { assessmentId: assessment.id } });

  it.each(LINE_BREAKS)('a title holding %j answers 400 naming the field, and no report is made', async (br) => {
    const before = (await reportsOf()).length;
    const res = await request(h.app)
      .post(`/api/v1/assessments/${assessment.id}/reports`)
      .set(bearer(org.admin.token))
      .send({ title: `Q3 review${br}${FORGED}` });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain('title');
    expect(await reportsOf()).toHaveLength(before);
  });

  it('a one-line title with any script is still taken', async () => {
    const res = await request(h.app)
      .post(`/api/v1/assessments/${assessment.id}/reports`)
      .set(bearer(org.admin.token))
      .send({ title: 'Prüfbericht — 東京 Q3' });
    expect(res.status).toBe(202);
    expect(res.body.title).toBe('Prüfbericht — 東京 Q3');
  });

  it("the share mail puts a title and an organization name stored before (with line breaks) on one line", async () => {
    const other = await createOrg(h);
    await h.deps.prisma.organization.update({ where: { id: other.id }, data: { name: `Acme\n${FORGED}\u2028` } });
    const asm = await insertAssessmentIn(h, other.id, (await insertProject(h, other.id)).id, 'completed');
    const report = await insertReadyReport(h, other.id, asm.id, { title: `Q3\r\n\r\n${FORGED}\u202e` });
    const to = `auditor-${uniqueSuffix()}@partner.example`;

    const res = await request(h.app).post(`/api/v1/reports/${report.id}/shares`).set(bearer(other.admin.token)).send({ email: to });
    expect(res.status).toBe(201);

    const mails = h.mail().filter((m) => m.to === to);
    expect(mails).toHaveLength(1);
    const [mail] = mails;
    expect(mail.subject).not.toMatch(/[\r\n\u2028]/);
    const lines = mail.text.split(/\r\n|\r|\n|\u2028|\u2029|\u0085/);
    expect(lines.some((line) => line.startsWith(FORGED))).toBe(false);
    expect(lines[0]).toBe(`Acme ${FORGED} shared the report "Q3 ${FORGED}" with you.`);
  });
});

/** No line of the mail starts with the forged text, and the subject is one line. */
function expectNoForgedLine(mail: { subject: string; text: string }) {
  expect(mail.subject).not.toMatch(/[\r\n\u2028]/);
  expect(mail.text.split(/\r\n|\r|\n|\u2028|\u2029|\u0085/).some((line) => line.startsWith(FORGED))).toBe(false);
}

describe('names stored before names were one line, in the other mails the API sends', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(() => h.close());

  it("an invitation (sent to an outside address) puts the organization's name on one line", async () => {
    const org = await createOrg(h);
    await h.deps.prisma.organization.update({ where: { id: org.id }, data: { name: `Acme\n\n${FORGED}\n` } });
    const to = `invitee-${uniqueSuffix()}@partner.example`;
    const res = await request(h.app).post('/api/v1/invitations').set(bearer(org.admin.token)).send({ email: to, role: 'member' });
    expect(res.status).toBe(201);
    const mails = h.mail().filter((m) => m.to === to);
    expect(mails).toHaveLength(1);
    expectNoForgedLine(mails[0]);
    expect(mails[0].text).toContain(`"Acme ${FORGED}"`);
  });

  it("a password-reset mail puts the user's name on one line", async () => {
    const org = await createOrg(h);
    await h.deps.prisma.user.update({ where: { id: org.member.id }, data: { name: `Mo\r\n${FORGED}` } });
    const res = await request(h.app).post('/api/v1/auth/password-reset').send({ email: org.member.email });
    expect(res.status).toBe(202);
    await resetLinkFor(h, org.member.email); // the mail is sent after the answer
    const mails = h.mail().filter((m) => m.to === org.member.email);
    expect(mails).toHaveLength(1);
    expectNoForgedLine(mails[0]);
    expect(mails[0].text).toMatch(new RegExp(`^Hello Mo ${FORGED.replace(/[.?*+^$[\]\\(){}|-]/g, '\\$&')},\n`));
  });
});

describe('a name a sign-in provider hands us', () => {
  const APP = { clientId: 'Iv1.review3', clientSecret: 'review3-github-secret-0123456789', redirectUri: redirectUriOf('github') };
  let gh: LoopbackGithub;
  let h: Harness;

  beforeAll(async () => {
    gh = await startGithubServer(APP);
    h = await createHarness({ PUBLIC_BASE_URL: APP_BASE_URL, ...githubEnvFor(gh, APP), LOGIN_RATE_LIMIT_PER_MINUTE: '1000' });
  });
  afterAll(async () => {
    await h?.close();
    await gh?.close();
  });

  async function signInAs(name: string) {
    const login = `octo-${uniqueSuffix()}`;
    const email = `${login}@example.test`;
    gh.addAccount({ id: Math.floor(Math.random() * 1e9), login, name, emails: [{ email, primary: true, verified: true }] });
    const started = await startFlow(h, 'github');
    const url = new URL(started.location);
    url.searchParams.set('login', login);
    const back = await fetch(url, { redirect: 'manual' });
    const res = await callback(h, 'github', new URL(back.headers.get('location')!), started.flowId);
    return { res, email };
  }

  it.each([
    ['a line break', `Mona\n${FORGED}`],
    ['a NUL and an escape sequence', 'Mona\u0000\u001b[31mLisa'],
  ])('with %s signs in (no 500) as one line of text, and so is the organization named after it', async (_what, name) => {
    const { res, email } = await signInAs(name);
    expect(res.status).toBeLessThan(500);
    const user = await h.deps.prisma.user.findFirstOrThrow({ where: { email }, include: { memberships: { include: { organization: true } } } });
    expect(user.name).not.toMatch(/[\p{Cc}\p{Zl}\p{Zp}]/u);
    expect(user.memberships[0].organization.name).not.toMatch(/[\p{Cc}\p{Zl}\p{Zp}]/u);
  });
});
