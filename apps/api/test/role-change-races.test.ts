// A request authorized with the role its caller held when it started, and a demotion committed while it ran (its
// password check, a bcrypt comparison, held open here): what the request writes is checked against the role as
// committed (lockOwnRole), so a demoted admin cannot leave behind an invitation or an API key beyond the new role.
import bcrypt from 'bcrypt';
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, insertGrant, insertProject, TEST_PASSWORD, type TestOrg, type TestUser } from './support/fixtures';
import { newId } from '@svc/db';
import { createKey, eventsOf, insertAssessmentIn, insertFinding, insertReadyReport, PUBLIC_URL, subscribe } from './support/domain';
import { queuedBehind, untilBlockedBy, whileRowsHeld } from './support/row-locks';
import { buildZip } from './support/zips';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  // Three writes of one organization wait behind one held row at once here (the three-way races): three turns.
  h = await createHarness({ ORGANIZATION_WRITES_IN_FLIGHT: '3' });
  org = await createOrg(h);
});
afterAll(() => h.close());
afterEach(() => jest.restoreAllMocks());

/** Holds the next password comparison until `release`: `entered` resolves once the request is inside it. */
function holdNextPasswordCheck() {
  const realCompare = bcrypt.compare.bind(bcrypt) as (data: string, hash: string) => Promise<boolean>;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let markEntered!: () => void;
  const entered = new Promise<void>((r) => (markEntered = r));
  jest.spyOn(bcrypt, 'compare').mockImplementationOnce((async (data: string, hash: string) => {
    markEntered();
    await gate;
    return realCompare(data, hash);
  }) as never);
  return { entered, release };
}

async function demoteWhileHeld(admin: TestUser, send: () => request.Test): Promise<request.Response> {
  const held = holdNextPasswordCheck();
  const pending = send().then((res) => res);
  await held.entered;
  const demoted = await request(h.app).patch(`/api/v1/members/${admin.id}`).set(bearer(org.owner.token)).send({ role: 'member' });
  expect(demoted.status).toBe(200);
  held.release();
  return pending;
}

it('an invitation sent while its admin is demoted to member is refused (403), and no invitation is left to accept', async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'inviting-admin');
  const email = `alt-${uniqueSuffix()}@example.test`;
  const res = await demoteWhileHeld(admin, () =>
    request(h.app).post('/api/v1/invitations').set(bearer(admin.token)).send({ email, role: 'admin', current_password: TEST_PASSWORD }),
  );
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ detail: 'Inviting with the role admin needs a role you no longer hold (yours is now member).' });
  expect(await h.deps.prisma.invitation.count({ where: { organizationId: org.id, email } })).toBe(0);
  expect(h.mail().filter((m) => m.to === email)).toHaveLength(0);
});

it('an API key minted while its admin is demoted to member is refused (403): none is stored with the admin scopes', async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'minting-admin');
  const res = await demoteWhileHeld(admin, () =>
    request(h.app).post('/api/v1/api-keys').set(bearer(admin.token)).send({ name: 'before the demotion', scopes: ['webhooks:read'], current_password: TEST_PASSWORD }),
  );
  expect(res.status).toBe(403);
  expect(res.body.detail).toBe('Minting API keys needs a role you no longer hold (yours is now member).');
  expect(await h.deps.prisma.apiKey.count({ where: { userId: admin.id } })).toBe(0);
});

it('demoted to manager meanwhile: a key with scopes beyond the manager bundle (webhooks) is refused', async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'admin-to-manager');
  const held = holdNextPasswordCheck();
  const minting = request(h.app).post('/api/v1/api-keys').set(bearer(admin.token))
    .send({ name: 'webhooks', scopes: ['webhooks:read'], current_password: TEST_PASSWORD }).then((r) => r);
  await held.entered;
  expect((await request(h.app).patch(`/api/v1/members/${admin.id}`).set(bearer(org.owner.token)).send({ role: 'manager' })).status).toBe(200);
  held.release();
  const refused = await minting;
  expect(refused.status).toBe(403);
  expect(refused.body).toMatchObject({ detail: "Scopes outside your role's bundle: webhooks:read." });
  expect(await h.deps.prisma.apiKey.count({ where: { userId: admin.id } })).toBe(0);
});

const roleOf = async (userId: string) =>
  (await h.deps.prisma.membership.findFirstOrThrow({ where: { organizationId: org.id, userId } })).role;

it("a member raised to admin by an admin demoted meanwhile: refused (403), the member's role is unchanged", async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'raising-admin');
  const accomplice = await createUserInOrg(h, org.id, 'member', 'accomplice');
  const res = await demoteWhileHeld(admin, () =>
    request(h.app).patch(`/api/v1/members/${accomplice.id}`).set(bearer(admin.token)).send({ role: 'admin', current_password: TEST_PASSWORD }),
  );
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ detail: "Changing members' roles needs a role you no longer hold (yours is now member)." });
  expect(await roleOf(accomplice.id)).toBe('member');
});

it('a member removed by an admin demoted meanwhile: refused (403), the member stays, still signed in', async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'removing-admin');
  const colleague = await createUserInOrg(h, org.id, 'member', 'colleague');
  // The removal waits for the colleague's account row (held here) while the owner demotes the admin.
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM users WHERE id = ${colleague.id} FOR NO KEY UPDATE`,
    () => request(h.app).delete(`/api/v1/members/${colleague.id}`).set(bearer(admin.token)).then((r) => r),
    1,
    async () => {
      const demoted = await request(h.app).patch(`/api/v1/members/${admin.id}`).set(bearer(org.owner.token)).send({ role: 'member' });
      expect(demoted.status).toBe(200);
    },
  );
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ detail: 'Removing members needs a role you no longer hold (yours is now member).' });
  expect(await roleOf(colleague.id)).toBe('member');
  expect((await request(h.app).get('/api/v1/members').set(bearer(colleague.token))).status).toBe(200);
});

it('two admins demoting each other at once: one demotion wins (200), the other is refused (403), never a 500', async () => {
  const first = await createUserInOrg(h, org.id, 'admin', 'first-admin');
  const second = await createUserInOrg(h, org.id, 'admin', 'second-admin');
  const demote = (by: TestUser, whom: TestUser) =>
    request(h.app).patch(`/api/v1/members/${whom.id}`).set(bearer(by.token)).send({ role: 'member' }).then((r) => r);
  // Both requests pass their checks and then wait on the two memberships, held here, so neither sees the other's
  // demotion when it was authorized.
  const results = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id IN (${first.id}, ${second.id}) FOR SHARE`,
    () => Promise.all([demote(first, second), demote(second, first)]),
    2,
  );
  expect(results.map((r) => r.status).sort()).toEqual([200, 403]);
  expect(results.find((r) => r.status === 403)!.body).toEqual({ detail: "Changing members' roles needs a role you no longer hold (yours is now member)." });
  expect([await roleOf(first.id), await roleOf(second.id)].sort()).toEqual(['admin', 'member']);
});

const demote = async (user: TestUser, role: 'manager' | 'member') =>
  expect((await request(h.app).patch(`/api/v1/members/${user.id}`).set(bearer(org.owner.token)).send({ role })).status).toBe(200);

it('a write grant given by an admin demoted to manager meanwhile (no grant of their own on the project): 404, no grant', async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'granting-admin');
  const accomplice = await createUserInOrg(h, org.id, 'member', 'grantee');
  const project = await insertProject(h, org.id);
  // The grant waits for its advisory lock (held here) while the owner demotes the admin.
  const lockKey = `grants:project:${project.id}`;
  const res = await whileRowsHeld(h,
    (tx) => tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${lockKey}, 0))`,
    () => request(h.app).post(`/api/v1/projects/${project.id}/access`).set(bearer(admin.token)).send({ user_id: accomplice.id, access: 'write' }).then((r) => r),
    1,
    () => demote(admin, 'manager'),
  );
  expect(res.status).toBe(404);
  expect(await h.deps.prisma.accessGrant.count({ where: { projectId: project.id } })).toBe(0);
});

it('a team member added by an admin demoted to member meanwhile: refused (403), the team is unchanged', async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'team-admin');
  const colleague = await createUserInOrg(h, org.id, 'member', 'team-candidate');
  const team = await request(h.app).post('/api/v1/teams').set(bearer(org.owner.token)).send({ name: `Team ${colleague.id}` });
  expect(team.status).toBe(201);
  const res = await changedWhileHeld(org.id, admin, 'member', () =>
    request(h.app).put(`/api/v1/teams/${team.body.id}/members/${colleague.id}`).set(bearer(admin.token)).then((r) => r),
  );
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ detail: 'Adding team members needs a role you no longer hold (yours is now member).' });
  expect(await h.deps.prisma.teamMember.count({ where: { teamId: team.body.id } })).toBe(0);
});

it("a manager's write grant revoked while they grant write to someone else: 404, no grant (their access as the grant commits)", async () => {
  const manager = await createUserInOrg(h, org.id, 'manager', 'granting-manager');
  const colleague = await createUserInOrg(h, org.id, 'member', 'would-be-grantee');
  const project = await insertProject(h, org.id);
  const own = await insertGrant(h, org.id, { projectId: project.id }, { userId: manager.id }, 'write');
  const lockKey = `grants:project:${project.id}`;
  const res = await whileRowsHeld(h,
    (tx) => tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${lockKey}, 0))`,
    () => request(h.app).post(`/api/v1/projects/${project.id}/access`).set(bearer(manager.token)).send({ user_id: colleague.id, access: 'write' }).then((r) => r),
    1,
    (tx) => tx.accessGrant.delete({ where: { id: own.id } }),
  );
  expect(res.status).toBe(404);
  expect(await h.deps.prisma.accessGrant.count({ where: { projectId: project.id } })).toBe(0);
});

it("a member's role changed by someone else meanwhile: the change applies to the role as committed, and the audit entry names it", async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'second-changer');
  const colleague = await createUserInOrg(h, org.id, 'member', 'changed-twice');
  // The admin raises the colleague to manager (its password check held) while the owner makes them an admin.
  const held = holdNextPasswordCheck();
  const raising = request(h.app).patch(`/api/v1/members/${colleague.id}`).set(bearer(admin.token)).send({ role: 'manager', current_password: TEST_PASSWORD }).then((r) => r);
  await held.entered;
  expect((await request(h.app).patch(`/api/v1/members/${colleague.id}`).set(bearer(org.owner.token)).send({ role: 'admin' })).status).toBe(200);
  held.release();
  const res = await raising;
  expect(res.status).toBe(200);
  expect(await roleOf(colleague.id)).toBe('manager');
  const [entry] = await h.deps.prisma.auditEvent.findMany({
    where: { organizationId: org.id, action: 'member.role_changed', targetId: colleague.id, actorId: admin.id },
  });
  expect(entry?.metadata).toMatchObject({ previous_role: 'admin', role: 'manager' });
});

it("a webhook created while its admin's membership is held by a change that then writes the organization's rows: no deadlock (201)", async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'webhook-admin');
  // Stands for a role change of the admin's under way: it holds their membership and then inserts a row of the
  // organization (its audit entry). The creation, waiting for that membership, must not hold up the insert.
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id = ${admin.id} FOR NO KEY UPDATE`,
    () => request(h.app).post('/api/v1/webhooks/subscriptions').set(bearer(admin.token))
      .send({ name: 'held', url: 'https://203.0.114.10/hooks', events: ['finding.created'] }).then((r) => r),
    1,
    (tx) => tx.team.create({ data: { id: newId('team'), organizationId: org.id, name: `Written meanwhile ${admin.id}` } }),
  );
  expect(res.status).toBe(201);
});

describe('what an admin demoted to member meanwhile (the password check held) hands out: refused (403), nothing made', () => {
  const handOuts: Array<{ what: string; detail: string; prepare: (admin: TestUser) => Promise<() => request.Test>; made: () => Promise<number> }> = [
    {
      what: 'an issue tracker',
      detail: 'Configuring issue trackers',
      prepare: async (admin) => () => request(h.app).post('/api/v1/issue-export-targets').set(bearer(admin.token))
        .send({ kind: 'github', name: `gh ${admin.id}`, repository: 'acme/web', token: 'ghp_trackerToken0123456789', current_password: TEST_PASSWORD }),
      made: () => h.deps.prisma.issueExportTarget.count({ where: { organizationId: org.id } }),
    },
    {
      what: 'an integration',
      detail: 'Connecting integrations',
      prepare: async (admin) => () => request(h.app).post('/api/v1/integrations').set(bearer(admin.token))
        .send({ kind: 'github', name: `GitHub ${admin.id}`, token: 'ghp_integrationToken0123456789', current_password: TEST_PASSWORD }),
      made: () => h.deps.prisma.integration.count({ where: { organizationId: org.id } }),
    },
    {
      what: 'a published report URL',
      detail: 'Publishing reports',
      prepare: async (admin) => {
        const report = await readyReport();
        return () => request(h.app).post(`/api/v1/reports/${report.id}/publication`).set(bearer(admin.token)).send({ current_password: TEST_PASSWORD });
      },
      made: () => h.deps.prisma.reportShare.count({ where: { organizationId: org.id } }),
    },
    {
      what: 'a report shared by e-mail',
      detail: 'Sharing reports',
      prepare: async (admin) => {
        const report = await readyReport();
        return () => request(h.app).post(`/api/v1/reports/${report.id}/shares`).set(bearer(admin.token))
          .send({ email: `outsider-${admin.id}@example.test`, current_password: TEST_PASSWORD });
      },
      made: () => h.deps.prisma.reportShare.count({ where: { organizationId: org.id } }),
    },
  ];
  let readyReport: () => ReturnType<typeof insertReadyReport>;
  beforeAll(async () => {
    const assessment = await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed');
    readyReport = () => insertReadyReport(h, org.id, assessment.id);
  });

  it.each(handOuts)('$what', async ({ detail, prepare, made }) => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'handing-out-admin');
    const send = await prepare(admin);
    const before = await made();
    const res = await demoteWhileHeld(admin, send);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: `${detail} needs a role you no longer hold (yours is now member).` });
    expect(await made()).toBe(before);
  });
});

it("a manager's write grant revoked while their grant to someone else commits: the revocation waits for it (the access it rests on is held)", async () => {
  const manager = await createUserInOrg(h, org.id, 'manager', 'held-grant-manager');
  const colleague = await createUserInOrg(h, org.id, 'member', 'held-grantee');
  const project = await insertProject(h, org.id);
  const own = await insertGrant(h, org.id, { projectId: project.id }, { userId: manager.id }, 'write');
  let revocation!: Promise<request.Response>;
  // The project's row held here: the new grant, checked and about to be inserted, waits for it (its foreign key).
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM projects WHERE id = ${project.id} FOR UPDATE`,
    () => request(h.app).post(`/api/v1/projects/${project.id}/access`).set(bearer(manager.token)).send({ user_id: colleague.id, access: 'write' }).then((r) => r),
    1,
    async (_tx, holder) => {
      revocation = request(h.app).delete(`/api/v1/projects/${project.id}/access/${own.id}`).set(bearer(org.owner.token)).then((r) => r);
      // The revocation queues behind the grant, which queues behind this transaction.
      await untilBlockedBy(h, holder, 2);
    },
  );
  expect(res.status).toBe(201);
  expect((await revocation).status).toBe(204);
  expect(await h.deps.prisma.accessGrant.count({ where: { projectId: project.id, userId: colleague.id } })).toBe(1);
});

it("a manager removed from the team their write access comes from while they grant: 404, no grant", async () => {
  const manager = await createUserInOrg(h, org.id, 'manager', 'team-granting-manager');
  const colleague = await createUserInOrg(h, org.id, 'member', 'team-grantee');
  const project = await insertProject(h, org.id);
  const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: org.id, name: `Writers ${manager.id}` } });
  await h.deps.prisma.teamMember.create({ data: { teamId: team.id, userId: manager.id } });
  await insertGrant(h, org.id, { projectId: project.id }, { teamId: team.id }, 'write');
  const lockKey = `grants:project:${project.id}`;
  const res = await whileRowsHeld(h,
    (tx) => tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${lockKey}, 0))`,
    () => request(h.app).post(`/api/v1/projects/${project.id}/access`).set(bearer(manager.token)).send({ user_id: colleague.id, access: 'write' }).then((r) => r),
    1,
    (tx) => tx.teamMember.deleteMany({ where: { teamId: team.id, userId: manager.id } }),
  );
  expect(res.status).toBe(404);
  expect(await h.deps.prisma.accessGrant.count({ where: { projectId: project.id, userId: colleague.id } })).toBe(0);
});

/**
 * Runs `send` while this test's transaction holds `user`'s membership, then changes it there (`to`: a role, or a
 * transfer of ownership to `newOwner`) and commits: the request, authorized with the role before, meets the change
 * as it re-checks the role (on code that does not re-check, it never waits, and untilBlockedBy says so).
 */
async function changedWhileHeld<T>(orgId: string, user: TestUser, to: 'member' | 'manager' | 'removed' | { newOwner: TestUser }, send: () => Promise<T>): Promise<T> {
  return whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${orgId} AND user_id = ${user.id} FOR NO KEY UPDATE`,
    send,
    1,
    async (tx) => {
      if (to === 'removed') {
        await tx.membership.deleteMany({ where: { organizationId: orgId, userId: user.id } });
      } else if (typeof to === 'string') {
        await tx.membership.updateMany({ where: { organizationId: orgId, userId: user.id }, data: { role: to } });
      } else {
        await tx.membership.updateMany({ where: { organizationId: orgId, userId: user.id }, data: { role: 'admin' } });
        await tx.membership.updateMany({ where: { organizationId: orgId, userId: to.newOwner.id }, data: { role: 'owner' } });
      }
    },
  );
}

describe("an organization's settings changed by an admin demoted to member meanwhile: refused (403), nothing changed", () => {
  /**
   * An erasure request of a new member awaiting confirmation, which `admin` will `step`. Written straight to the
   * database, never 'previewing': the run's database is shared, and another file's erasure run would take it up.
   */
  async function stepOnFiledErasure(admin: TestUser, step: 'cancel' | 'confirm'): Promise<() => request.Test> {
    const person = await createUserInOrg(h, org.id, 'member', 'erasure-subject');
    const id = newId('era');
    await h.deps.prisma.erasureRequest.create({
      data: { id, organizationId: org.id, subjectUserId: person.id, status: 'awaiting_confirmation', pseudonymName: `Erased ${id}`, pseudonymEmail: `${id}@erased.invalid`, requestedById: org.owner.id },
    });
    return () => request(h.app).post(`/api/v1/governance/erasure-requests/${id}/${step}`).set(bearer(admin.token));
  }
  const erasureStatuses = () => h.deps.prisma.erasureRequest.groupBy({ by: ['status'], where: { organizationId: org.id }, _count: true });

  const settings: Array<{ what: string; detail: string; prepare: (admin: TestUser) => Promise<() => request.Test>; state: () => Promise<unknown> }> = [
    {
      what: 'a rename',
      detail: 'Renaming the organization',
      prepare: async (admin) => () => request(h.app).patch('/api/v1/organization').set(bearer(admin.token)).send({ name: `Renamed by ${admin.id}` }),
      state: async () => (await h.deps.prisma.organization.findUniqueOrThrow({ where: { id: org.id } })).name,
    },
    {
      what: 'the API-key policy',
      detail: 'Changing the API-key policy',
      prepare: async (admin) => () => request(h.app).put('/api/v1/organization/api-key-policy').set(bearer(admin.token)).send({ enabled: true, inactivity_days: 1 }),
      state: async () => (await h.deps.prisma.organization.findUniqueOrThrow({ where: { id: org.id } })).keyPolicyEnabled,
    },
    {
      what: 'the SLA policy',
      detail: 'Changing the SLA policy',
      prepare: async (admin) => () => request(h.app).put('/api/v1/governance/sla').set(bearer(admin.token))
        .send({ critical: 1, high: 2, medium: 3, low: 4, info: null }),
      state: () => request(h.app).get('/api/v1/governance/sla').set(bearer(org.owner.token)).then((r) => r.body),
    },
    {
      what: 'a spend threshold',
      detail: 'Managing spend limits',
      prepare: async (admin) => () => request(h.app).post('/api/v1/billing/limits').set(bearer(admin.token)).send({ kind: 'threshold', credits: '5' }),
      state: () => h.deps.prisma.spendLimit.count({ where: { organizationId: org.id } }),
    },
    {
      what: 'a spend limit deleted',
      detail: 'Managing spend limits',
      prepare: async (admin) => {
        const limit = await request(h.app).post('/api/v1/billing/limits').set(bearer(org.owner.token)).send({ kind: 'threshold', credits: '7' });
        expect(limit.status).toBe(201);
        return () => request(h.app).delete(`/api/v1/billing/limits/${limit.body.id}`).set(bearer(admin.token));
      },
      state: () => h.deps.prisma.spendLimit.count({ where: { organizationId: org.id } }),
    },
    {
      what: 'usage recorded',
      detail: 'Recording usage',
      prepare: async (admin) => () => request(h.app).post('/api/v1/usage').set(bearer(admin.token)).send({ credits: '1.50' }),
      state: () => h.deps.prisma.usageRecord.count({ where: { organizationId: org.id } }),
    },
    {
      what: 'an erasure request cancelled',
      detail: 'Cancelling erasure requests',
      prepare: async (admin) => stepOnFiledErasure(admin, 'cancel'),
      state: erasureStatuses,
    },
    {
      what: 'an erasure request filed',
      detail: 'Filing erasure requests',
      prepare: async (admin) => () => request(h.app).post('/api/v1/governance/erasure-requests').set(bearer(admin.token)).send({ user_id: org.member.id }),
      state: () => h.deps.prisma.erasureRequest.count({ where: { organizationId: org.id } }),
    },
    {
      what: 'an erasure request confirmed',
      detail: 'Confirming erasure requests',
      prepare: async (admin) => stepOnFiledErasure(admin, 'confirm'),
      state: erasureStatuses,
    },
  ];

  it.each(settings)('$what', async ({ detail, prepare, state }) => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'settings-admin');
    const send = await prepare(admin);
    const before = await state();
    const res = await changedWhileHeld(org.id, admin, 'member', () => send().then((r) => r));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: `${detail} needs a role you no longer hold (yours is now member).` });
    expect(await state()).toEqual(before);
  });
});

it('an organization deleted by an owner who transferred ownership meanwhile: refused (403), the organization and its history stay', async () => {
  const doomed = await createOrg(h);
  const event = await h.deps.prisma.event.create({ data: { id: newId('event'), organizationId: doomed.id, type: 'project.created', data: {} } });
  const res = await changedWhileHeld(doomed.id, doomed.owner, { newOwner: doomed.admin }, () =>
    request(h.app).delete('/api/v1/organization').set(bearer(doomed.owner.token)).send({ confirm: doomed.name }).then((r) => r),
  );
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ detail: 'Deleting the organization needs a role you no longer hold (yours is now admin).' });
  expect(await h.deps.prisma.organization.count({ where: { id: doomed.id } })).toBe(1);
  expect(await h.deps.prisma.event.count({ where: { id: event.id } })).toBe(1);
});

it("a lowering that the role as committed makes a raise (lowered further meanwhile, no password asked): 409, the role as committed stays", async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'lowering-admin');
  const colleague = await createUserInOrg(h, org.id, 'admin', 'lowered-twice');
  // The admin lowers the colleague from admin to manager (no password: a lowering) while the colleague's role is
  // lowered to member here: manager is then a raise, which asks for the password.
  // The first of the two memberships the change locks (in user-id order) is held here: it waits before it holds either.
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id IN (${admin.id}, ${colleague.id})
      ORDER BY user_id LIMIT 1 FOR SHARE`,
    () => request(h.app).patch(`/api/v1/members/${colleague.id}`).set(bearer(admin.token)).send({ role: 'manager' }).then((r) => r),
    1,
    (tx) => tx.membership.updateMany({ where: { organizationId: org.id, userId: colleague.id }, data: { role: 'member' } }),
  );
  expect(res.status).toBe(409);
  expect(res.body.detail).toBe("The member's role changed meanwhile (it is now member): making them manager raises it, which needs your password; send the change again.");
  expect(await roleOf(colleague.id)).toBe('member');
});

describe('a deletion by an admin demoted to member meanwhile: refused (403), nothing deleted', () => {
  const deletions: Array<{ what: string; detail: string; make: () => Promise<{ path: string; left: () => Promise<number> }> }> = [
    {
      what: 'a project (checked before its history is erased)',
      detail: 'Deleting projects',
      make: async () => {
        const project = await insertProject(h, org.id);
        return { path: `/api/v1/projects/${project.id}`, left: () => h.deps.prisma.project.count({ where: { id: project.id } }) };
      },
    },
    {
      what: 'an assessment',
      detail: 'Deleting assessments',
      make: async () => {
        const assessment = await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed');
        return { path: `/api/v1/assessments/${assessment.id}`, left: () => h.deps.prisma.assessment.count({ where: { id: assessment.id } }) };
      },
    },
  ];

  it.each(deletions)('$what', async ({ detail, make }) => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'deleting-admin');
    const target = await make();
    const res = await changedWhileHeld(org.id, admin, 'member', () => request(h.app).delete(target.path).set(bearer(admin.token)).then((r) => r));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: `${detail} needs a role you no longer hold (yours is now member).` });
    expect(await target.left()).toBe(1);
  });
});

it("an organization's owner who transfers ownership while its history is being erased: refused (403) as the row goes, the organization stays", async () => {
  const doomed = await createOrg(h);
  const event = await h.deps.prisma.event.create({ data: { id: newId('event'), organizationId: doomed.id, type: 'project.created', data: {} } });
  // The erasure of its events waits for the one held here, while ownership moves to the admin.
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM events WHERE id = ${event.id} FOR UPDATE`,
    () => request(h.app).delete('/api/v1/organization').set(bearer(doomed.owner.token)).send({ confirm: doomed.name }).then((r) => r),
    1,
    async (tx) => {
      await tx.membership.updateMany({ where: { organizationId: doomed.id, userId: doomed.owner.id }, data: { role: 'admin' } });
      await tx.membership.updateMany({ where: { organizationId: doomed.id, userId: doomed.admin.id }, data: { role: 'owner' } });
    },
  );
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ detail: 'Deleting the organization needs a role you no longer hold (yours is now admin).' });
  expect(await h.deps.prisma.organization.count({ where: { id: doomed.id } })).toBe(1);
});

it("a project deleted by an admin demoted to member while its history is being erased: refused (403) as its row goes, the project stays", async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'erasing-admin');
  const project = await insertProject(h, org.id);
  const subscription = await subscribe(h, org.owner.token, { projectId: project.id }, ['finding.created']);
  const event = await h.deps.prisma.event.create({ data: { id: newId('event'), organizationId: org.id, type: 'finding.created', projectId: project.id, data: {} } });
  const delivery = await h.deps.prisma.webhookDelivery.create({
    data: { id: newId('whdel'), organizationId: org.id, subscriptionId: subscription, eventId: event.id, eventType: event.type, payload: {}, payloadFormat: 'json', status: 'succeeded' },
  });
  // The erasure of its subscription's deliveries waits for the one held here (the first check has passed), while the
  // admin is demoted.
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM webhook_deliveries WHERE id = ${delivery.id} FOR UPDATE`,
    () => request(h.app).delete(`/api/v1/projects/${project.id}`).set(bearer(admin.token)).then((r) => r),
    1,
    (tx) => tx.membership.updateMany({ where: { organizationId: org.id, userId: admin.id }, data: { role: 'member' } }),
  );
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ detail: 'Deleting projects needs a role you no longer hold (yours is now member).' });
  expect(await h.deps.prisma.project.count({ where: { id: project.id } })).toBe(1);
  expect(await h.deps.prisma.webhookSubscription.count({ where: { id: subscription, deletedAt: null } })).toBe(1);
});

it('an organization deleted while a row of it is held for longer than 5 s: the deletion waits for it (204), no transaction timeout', async () => {
  const doomed = await createOrg(h);
  const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: doomed.id, name: 'Held' } });
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM teams WHERE id = ${team.id} FOR SHARE`,
    () => request(h.app).delete('/api/v1/organization').set(bearer(doomed.owner.token)).send({ confirm: doomed.name }).then((r) => r),
    1,
    () => new Promise((r) => setTimeout(r, 6000)),
  );
  expect(res.status).toBe(204);
  expect(await h.deps.prisma.organization.count({ where: { id: doomed.id } })).toBe(0);
}, 30_000);

describe("an organization deleted while one of its admins writes to it: the deletion goes first (204), the write is refused, never a deadlock's 500", () => {
  const writes: Array<{ what: string; prepare: (doomed: TestOrg) => Promise<() => request.Test> }> = [
    { what: 'a rename', prepare: async (doomed) => () => request(h.app).patch('/api/v1/organization').set(bearer(doomed.admin.token)).send({ name: 'Renamed meanwhile' }) },
    { what: 'usage recorded', prepare: async (doomed) => () => request(h.app).post('/api/v1/usage').set(bearer(doomed.admin.token)).send({ credits: '1.00' }) },
    {
      // Takes the team's row before the memberships: the deletion's cascade and it can deadlock, and PostgreSQL
      // rolls one back (the deletion then runs again; the addition answers 409, or 404 after the deletion).
      what: 'a team member added',
      prepare: async (doomed) => {
        const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: doomed.id, name: 'Joined meanwhile' } });
        return () => request(h.app).put(`/api/v1/teams/${team.id}/members/${doomed.member.id}`).set(bearer(doomed.admin.token));
      },
    },
  ];

  it.each(writes)('$what', async ({ prepare }) => {
    const doomed = await createOrg(h);
    const send = await prepare(doomed);
    let write!: Promise<request.Response>;
    // The organization's row share-locked here (as an insert's foreign key holds it): the deletion, its memberships
    // locked, waits at its DELETE; the write comes meanwhile and queues behind it. (The harness's pool has four
    // connections: this one, the deletion's, the write's and the test's own queries.)
    const res = await whileRowsHeld(h,
      (tx) => tx.$queryRaw`SELECT id FROM organizations WHERE id = ${doomed.id} FOR KEY SHARE`,
      () => request(h.app).delete('/api/v1/organization').set(bearer(doomed.owner.token)).send({ confirm: doomed.name }).then((r) => r),
      1,
      async (_tx, holder) => {
        write = send().then((r) => r);
        await untilBlockedBy(h, holder, 2);
      },
    );
    expect(res.status).toBe(204);
    expect([401, 403, 404, 409]).toContain((await write).status);
    expect(await h.deps.prisma.organization.count({ where: { id: doomed.id } })).toBe(0);
  });
});

it('a signing secret rotated by an admin demoted to member meanwhile (the password check held): refused (403), the secret unchanged', async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'rotating-admin');
  const created = await request(h.app).post('/api/v1/webhooks/subscriptions').set(bearer(org.owner.token))
    .send({ name: 'rotated', url: 'https://203.0.114.10/hooks', events: ['finding.created'] });
  expect(created.status).toBe(201);
  const before = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: created.body.id } });
  const res = await demoteWhileHeld(admin, () =>
    request(h.app).post(`/api/v1/webhooks/subscriptions/${created.body.id}/rotate-secret`).set(bearer(admin.token)).send({ current_password: TEST_PASSWORD }),
  );
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ detail: 'Routing events requires the admin or owner role, which you no longer hold.' });
  expect(res.body.secret).toBeUndefined();
  const after = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: created.body.id } });
  expect(after.secretEnc).toBe(before.secretEnc);
});

it('a project with an assessment deleted by an admin demoted to manager meanwhile (who keeps projects:delete): refused (403), nothing deleted', async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'demoted-project-deleter');
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
  const res = await changedWhileHeld(org.id, admin, 'manager', () =>
    request(h.app).delete(`/api/v1/projects/${project.id}`).set(bearer(admin.token)).then((r) => r),
  );
  expect(res.status).toBe(403);
  expect(res.body.detail).toMatch(/^Missing required scope: assessments:delete\. Deleting this project would delete its 1 assessment/);
  expect(await h.deps.prisma.project.count({ where: { id: project.id } })).toBe(1);
  expect(await h.deps.prisma.assessment.count({ where: { id: assessment.id } })).toBe(1);
});

describe('what an admin demoted to member meanwhile removes, revokes or edits: refused (403), nothing changed', () => {
  const asOwner = (req: request.Test) => req.set(bearer(org.owner.token));
  async function made(req: request.Test): Promise<string> {
    const res = await asOwner(req);
    expect([200, 201]).toContain(res.status);
    return res.body.id;
  }
  const team = () => made(request(h.app).post('/api/v1/teams').send({ name: `Team ${uniqueSuffix()}` }));
  let report: Awaited<ReturnType<typeof insertReadyReport>>;
  beforeAll(async () => {
    report = await insertReadyReport(h, org.id, (await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed')).id);
  });

  type Change = { path: string; method?: 'delete' | 'patch' | 'put'; body?: object; left: () => Promise<unknown> };
  const changes: Array<{ what: string; detail: string; make: () => Promise<Change> }> = [
    {
      what: 'a webhook subscription deleted',
      detail: 'Deleting webhook subscriptions',
      make: async () => {
        const id = await subscribe(h, org.owner.token, { org: true }, ['finding.created']);
        return { path: `/api/v1/webhooks/subscriptions/${id}`, left: () => h.deps.prisma.webhookSubscription.count({ where: { id, deletedAt: null } }) };
      },
    },
    {
      what: 'a notification target revoked',
      detail: 'Revoking notification targets',
      make: async () => {
        const id = await made(request(h.app).post('/api/v1/notification-targets').send({ kind: 'slack', name: 'chat', url: PUBLIC_URL, events: ['report.ready'] }));
        return { path: `/api/v1/notification-targets/${id}`, left: () => h.deps.prisma.webhookSubscription.count({ where: { id, deletedAt: null } }) };
      },
    },
    {
      what: 'an issue tracker revoked',
      detail: 'Revoking issue trackers',
      make: async () => {
        const id = await made(request(h.app).post('/api/v1/issue-export-targets')
          .send({ kind: 'github', name: `gh ${uniqueSuffix()}`, repository: 'acme/web', token: 'ghp_removalRaces0123456789', current_password: TEST_PASSWORD }));
        return { path: `/api/v1/issue-export-targets/${id}`, left: () => h.deps.prisma.issueExportTarget.count({ where: { id, deletedAt: null } }) };
      },
    },
    {
      what: 'an integration disconnected',
      detail: 'Disconnecting integrations',
      make: async () => {
        const id = await made(request(h.app).post('/api/v1/integrations')
          .send({ kind: 'github', name: `GitHub ${uniqueSuffix()}`, token: 'ghp_removalRaces0123456789', current_password: TEST_PASSWORD }));
        return { path: `/api/v1/integrations/${id}`, left: () => h.deps.prisma.integration.count({ where: { id } }) };
      },
    },
    {
      what: 'an integration unbound from a team',
      detail: 'Unbinding integrations from teams',
      make: async () => {
        const id = await made(request(h.app).post('/api/v1/integrations')
          .send({ kind: 'github', name: `GitHub ${uniqueSuffix()}`, token: 'ghp_removalRaces0123456789', current_password: TEST_PASSWORD }));
        const teamId = await team();
        expect((await asOwner(request(h.app).put(`/api/v1/integrations/${id}/teams/${teamId}`))).status).toBe(200);
        return { path: `/api/v1/integrations/${id}/teams/${teamId}`, left: () => h.deps.prisma.teamIntegration.count({ where: { teamId, integrationId: id } }) };
      },
    },
    {
      what: 'an invitation revoked',
      detail: 'Revoking invitations',
      make: async () => {
        const id = await made(request(h.app).post('/api/v1/invitations').send({ email: `invitee-${uniqueSuffix()}@example.test`, role: 'member', current_password: TEST_PASSWORD }));
        return { path: `/api/v1/invitations/${id}`, left: () => h.deps.prisma.invitation.count({ where: { id } }) };
      },
    },
    {
      what: 'a team deleted',
      detail: 'Deleting teams',
      make: async () => {
        const id = await team();
        return { path: `/api/v1/teams/${id}`, left: () => h.deps.prisma.team.count({ where: { id } }) };
      },
    },
    {
      what: 'a team renamed',
      detail: 'Editing teams',
      make: async () => {
        const id = await team();
        return { path: `/api/v1/teams/${id}`, method: 'patch', body: { name: `Renamed ${id}` }, left: async () => (await h.deps.prisma.team.findUniqueOrThrow({ where: { id } })).name };
      },
    },
    {
      what: 'a team member removed',
      detail: 'Removing team members',
      make: async () => {
        const teamId = await team();
        expect((await asOwner(request(h.app).put(`/api/v1/teams/${teamId}/members/${org.member.id}`))).status).toBe(200);
        return { path: `/api/v1/teams/${teamId}/members/${org.member.id}`, left: () => h.deps.prisma.teamMember.count({ where: { teamId } }) };
      },
    },
    {
      what: 'an access grant revoked',
      detail: 'Managing access',
      make: async () => {
        const project = await insertProject(h, org.id);
        const grant = await insertGrant(h, org.id, { projectId: project.id }, { userId: org.member.id }, 'read');
        return { path: `/api/v1/projects/${project.id}/access/${grant.id}`, left: () => h.deps.prisma.accessGrant.count({ where: { id: grant.id } }) };
      },
    },
    {
      what: "a report's published URL revoked",
      detail: 'Revoking report shares',
      make: async () => {
        expect((await asOwner(request(h.app).post(`/api/v1/reports/${report.id}/publication`)).send({ current_password: TEST_PASSWORD })).status).toBe(201);
        return {
          path: `/api/v1/reports/${report.id}/publication`,
          left: () => h.deps.prisma.reportShare.count({ where: { reportId: report.id, revokedAt: null } }),
        };
      },
    },
    {
      what: "a report's e-mail share revoked",
      detail: 'Revoking report shares',
      make: async () => {
        const share = await made(request(h.app).post(`/api/v1/reports/${report.id}/shares`).send({ email: `reader-${uniqueSuffix()}@example.test`, current_password: TEST_PASSWORD }));
        return { path: `/api/v1/reports/${report.id}/shares/${share}`, left: () => h.deps.prisma.reportShare.count({ where: { id: share, revokedAt: null } }) };
      },
    },
    {
      what: "a project's source removed",
      detail: "Removing a project's source",
      make: async () => {
        const project = await insertProject(h, org.id);
        await h.deps.prisma.projectSource.create({ data: { projectId: project.id, organizationId: org.id, kind: 'repository', repositoryUrl: 'https://203.0.114.10/acme/web.git', defaultBranch: 'main' } });
        return { path: `/api/v1/projects/${project.id}/source`, left: () => h.deps.prisma.projectSource.count({ where: { projectId: project.id } }) };
      },
    },
    {
      what: "a project's source changed",
      detail: "Changing a project's source",
      make: async () => {
        const project = await insertProject(h, org.id);
        return {
          path: `/api/v1/projects/${project.id}/source`,
          method: 'put',
          body: { type: 'repository', url: 'https://203.0.114.10/acme/web.git', default_branch: 'main' },
          left: () => h.deps.prisma.projectSource.count({ where: { projectId: project.id } }),
        };
      },
    },
    {
      what: 'a project renamed',
      detail: 'Editing projects',
      make: async () => {
        const project = await insertProject(h, org.id);
        return { path: `/api/v1/projects/${project.id}`, method: 'patch', body: { name: `Renamed ${project.id}` }, left: async () => (await h.deps.prisma.project.findUniqueOrThrow({ where: { id: project.id } })).name };
      },
    },
    {
      what: "an assessment's notes edited",
      detail: 'Editing assessments',
      make: async () => {
        const assessment = await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed');
        return { path: `/api/v1/assessments/${assessment.id}`, method: 'patch', body: { notes: 'written after the demotion' }, left: async () => (await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: assessment.id } })).notes };
      },
    },
  ];

  it.each(changes)('$what', async ({ detail, make }) => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'removing-admin');
    const { path, method = 'delete', body, left } = await make();
    const before = await left();
    const res = await changedWhileHeld(org.id, admin, 'member', () => {
      const req = request(h.app)[method](path).set(bearer(admin.token));
      return (body ? req.send(body) : req).then((r) => r);
    });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: `${detail} needs a role you no longer hold (yours is now member).` });
    expect(await left()).toEqual(before);
  });

  it('a webhook subscription deleted by an admin removed from the organization meanwhile: refused (403), the subscription stays', async () => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'removed-admin');
    const id = await subscribe(h, org.owner.token, { org: true }, ['finding.created']);
    const res = await changedWhileHeld(org.id, admin, 'removed', () => request(h.app).delete(`/api/v1/webhooks/subscriptions/${id}`).set(bearer(admin.token)).then((r) => r));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: 'Deleting webhook subscriptions needs a role you no longer hold.' });
    expect(await h.deps.prisma.webhookSubscription.count({ where: { id, deletedAt: null } })).toBe(1);
  });

  it("a project's source removed by a manager whose write grant is revoked meanwhile: 404, the source stays", async () => {
    const manager = await createUserInOrg(h, org.id, 'manager', 'source-manager');
    const project = await insertProject(h, org.id);
    const grant = await insertGrant(h, org.id, { projectId: project.id }, { userId: manager.id }, 'write');
    await h.deps.prisma.projectSource.create({ data: { projectId: project.id, organizationId: org.id, kind: 'repository', repositoryUrl: 'https://203.0.114.10/acme/web.git', defaultBranch: 'main' } });
    // The manager's membership held here; the grant goes before it is let go: the removal, checked on the grant as
    // the request began, meets its loss as it re-checks.
    const res = await whileRowsHeld(h,
      (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id = ${manager.id} FOR NO KEY UPDATE`,
      () => request(h.app).delete(`/api/v1/projects/${project.id}/source`).set(bearer(manager.token)).then((r) => r),
      1,
      (tx) => tx.accessGrant.delete({ where: { id: grant.id } }),
    );
    expect(res.status).toBe(404);
    expect(await h.deps.prisma.projectSource.count({ where: { projectId: project.id } })).toBe(1);
  });

  it('a project deleted by a manager whose write grant is revoked meanwhile: 404, the project stays', async () => {
    const manager = await createUserInOrg(h, org.id, 'manager', 'deleting-manager');
    const project = await insertProject(h, org.id);
    const grant = await insertGrant(h, org.id, { projectId: project.id }, { userId: manager.id }, 'write');
    const res = await whileRowsHeld(h,
      (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id = ${manager.id} FOR NO KEY UPDATE`,
      () => request(h.app).delete(`/api/v1/projects/${project.id}`).set(bearer(manager.token)).then((r) => r),
      1,
      (tx) => tx.accessGrant.delete({ where: { id: grant.id } }),
    );
    expect(res.status).toBe(404);
    expect(await h.deps.prisma.project.count({ where: { id: project.id } })).toBe(1);
  });

  it("an admin's API key revoked by another admin while its holder becomes the owner: refused (403), the key still works", async () => {
    const other = await createOrg(h);
    const revoker = await createUserInOrg(h, other.id, 'admin', 'key-revoker');
    const key = await createKey(h, other.admin.token, ['org:read']);
    const { id } = await h.deps.prisma.apiKey.findFirstOrThrow({ where: { userId: other.admin.id } });
    // The key holder's membership held here while ownership passes to them.
    const res = await whileRowsHeld(h,
      (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${other.id} AND user_id = ${other.admin.id} FOR NO KEY UPDATE`,
      () => request(h.app).delete(`/api/v1/api-keys/${id}`).set(bearer(revoker.token)).then((r) => r),
      1,
      async (tx) => {
        await tx.membership.updateMany({ where: { organizationId: other.id, userId: other.owner.id }, data: { role: 'admin' } });
        await tx.membership.updateMany({ where: { organizationId: other.id, userId: other.admin.id }, data: { role: 'owner' } });
      },
    );
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: 'You cannot revoke the API key of someone whose role (owner) is above yours.' });
    expect((await request(h.app).get('/api/v1/organization').set(bearer(key))).status).toBe(200);
  });

  it("a manager's API key revoked: refused (403), the key still works", async () => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'revoking-admin');
    const manager = await createUserInOrg(h, org.id, 'manager', 'key-holder');
    const key = await createKey(h, manager.token, ['org:read']);
    const { id } = await h.deps.prisma.apiKey.findFirstOrThrow({ where: { userId: manager.id } });
    const res = await changedWhileHeld(org.id, admin, 'member', () => request(h.app).delete(`/api/v1/api-keys/${id}`).set(bearer(admin.token)).then((r) => r));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: "Revoking other people's API keys needs a role you no longer hold (yours is now member)." });
    expect((await request(h.app).get('/api/v1/organization').set(bearer(key))).status).toBe(200);
  });
});

describe('what a caller demoted meanwhile triages, moves, generates or sends again: refused (403), nothing changed', () => {
  type Setup = { path: string; method?: 'post' | 'patch' | 'put'; body?: object; left: () => Promise<unknown> };
  // `make` arranges what the request acts on, with write access for `user` where their role needs a grant.
  const cases: Array<{ what: string; role: 'admin' | 'manager'; to: 'manager' | 'member'; detail: string; make: (user: TestUser) => Promise<Setup> }> = [];
  async function assessmentFor(user: TestUser, status: string) {
    const project = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: project.id }, { userId: user.id }, 'write');
    return insertAssessmentIn(h, org.id, project.id, status);
  }
  const statusOf = (id: string) => async () => (await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id } })).status;
  const findingOf = (id: string) => () => h.deps.prisma.finding.findUniqueOrThrow({ where: { id }, select: { status: true, severity: true, assigneeId: true } });
  cases.push({
    what: 'a finding suppressed (final) by an admin demoted to manager', role: 'admin', to: 'manager', detail: 'Suppressing findings',
    make: async (user) => {
      const finding = await insertFinding(h, await assessmentFor(user, 'completed'));
      return { path: `/api/v1/findings/${finding.id}/suppress`, left: findingOf(finding.id) };
    },
  });
  cases.push(
    {
      what: 'a project created (no project, no write grant left to the member)', role: 'manager', to: 'member', detail: 'Creating projects',
      make: async (user) => {
        const name = `Created ${uniqueSuffix()}`;
        const left = async () => [await h.deps.prisma.project.count({ where: { organizationId: org.id, name } }), await h.deps.prisma.accessGrant.count({ where: { userId: user.id } })];
        return { path: '/api/v1/projects', body: { name }, left };
      },
    },
    {
      what: 'an assessment created', role: 'manager', to: 'member', detail: 'Creating assessments',
      make: async (user) => {
        const project = await insertProject(h, org.id);
        await insertGrant(h, org.id, { projectId: project.id }, { userId: user.id }, 'write');
        return { path: `/api/v1/projects/${project.id}/assessments`, body: { name: 'after the demotion' }, left: () => h.deps.prisma.assessment.count({ where: { projectId: project.id } }) };
      },
    },
    {
      what: 'a team created', role: 'admin', to: 'manager', detail: 'Creating teams',
      make: async () => {
        const name = `Team ${uniqueSuffix()}`;
        return { path: '/api/v1/teams', body: { name }, left: () => h.deps.prisma.team.count({ where: { organizationId: org.id, name } }) };
      },
    },
    {
      what: 'a risk accepted', role: 'manager', to: 'member', detail: 'Accepting risks',
      make: async (user) => {
        const finding = await insertFinding(h, await assessmentFor(user, 'completed'));
        return { path: `/api/v1/findings/${finding.id}/accept-risk`, left: findingOf(finding.id) };
      },
    },
    {
      what: "a finding's severity overridden", role: 'manager', to: 'member', detail: 'Overriding severities',
      make: async (user) => {
        const finding = await insertFinding(h, await assessmentFor(user, 'completed'));
        return { path: `/api/v1/findings/${finding.id}/severity`, body: { severity: 'low' }, left: findingOf(finding.id) };
      },
    },
    ...([
      ['launch', 'draft', 'Launching assessments'],
      ['cancel', 'running', 'Cancelling assessments'],
      ['emergency-stop', 'queued', 'Stopping assessments'],
      ['start', 'queued', 'Starting assessments'],
      ['complete', 'running', 'Completing assessments'],
      ['fail', 'running', 'Failing assessments'],
      ['archive', 'completed', 'Archiving assessments'],
    ] as const).map(([action, from, doing]) => ({
      what: `an assessment's ${action}`, role: 'manager' as const, to: 'member' as const, detail: doing,
      make: async (user: TestUser): Promise<Setup> => {
        const assessment = await assessmentFor(user, from);
        const body = action === 'complete' ? { summary: 'done' } : action === 'fail' ? { reason: 'engine crashed' } : undefined;
        const left = async () => [await statusOf(assessment.id)(), (await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: assessment.id } })).archivedAt];
        return { path: `/api/v1/assessments/${assessment.id}/${action}`, body, left };
      },
    })),
    {
      what: 'a fix verification started', role: 'manager', to: 'member', detail: 'Verifying fixes',
      make: async (user) => {
        const finding = await insertFinding(h, await assessmentFor(user, 'completed'));
        return { path: `/api/v1/findings/${finding.id}/fix-verifications`, left: () => h.deps.prisma.fixVerification.count({ where: { findingId: finding.id } }) };
      },
    },
    {
      what: 'a fix verification completed', role: 'manager', to: 'member', detail: 'Verifying fixes',
      make: async (user) => {
        const finding = await insertFinding(h, await assessmentFor(user, 'completed'));
        const run = await h.deps.prisma.fixVerification.create({ data: { id: newId('fxv'), organizationId: org.id, findingId: finding.id, status: 'running' } });
        const left = async () => [await findingOf(finding.id)(), (await h.deps.prisma.fixVerification.findUniqueOrThrow({ where: { id: run.id } })).status];
        return { path: `/api/v1/fix-verifications/${run.id}/complete`, body: { result: 'fixed' }, left };
      },
    },
    {
      what: 'a regression recorded by monitoring', role: 'manager', to: 'member', detail: 'Recording monitoring checks',
      make: async (user) => {
        const finding = await insertFinding(h, await assessmentFor(user, 'completed'), { status: 'fixed' });
        return { path: `/api/v1/findings/${finding.id}/monitoring-checks`, body: { result: 'regressed' }, left: findingOf(finding.id) };
      },
    },
    {
      what: 'a PR review recorded', role: 'manager', to: 'member', detail: 'Recording PR reviews',
      make: async (user) => {
        const project = await insertProject(h, org.id);
        await insertGrant(h, org.id, { projectId: project.id }, { userId: user.id }, 'write');
        const body = { repository: 'acme/web', pr_number: 7, verdict: 'approved', findings_count: 0 };
        return { path: `/api/v1/projects/${project.id}/pr-reviews`, body, left: () => h.deps.prisma.prReview.count({ where: { projectId: project.id } }) };
      },
    },
    {
      what: 'a finding exported to an issue tracker', role: 'manager', to: 'member', detail: 'Exporting findings to issue trackers',
      make: async (user) => {
        const finding = await insertFinding(h, await assessmentFor(user, 'completed'));
        const tracker = await request(h.app).post('/api/v1/issue-export-targets').set(bearer(org.owner.token))
          .send({ kind: 'github', name: `gh ${uniqueSuffix()}`, repository: 'acme/web', token: 'ghp_exportRaces0123456789', current_password: TEST_PASSWORD });
        expect(tracker.status).toBe(201);
        const left = async () => [
          await h.deps.prisma.findingIssueExport.count({ where: { findingId: finding.id } }),
          await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id, action: 'finding.issue_exported', targetId: finding.id } }),
        ];
        return { path: `/api/v1/findings/${finding.id}/issue-exports`, body: { target_id: tracker.body.id }, left };
      },
    },
    {
      what: 'a report generated', role: 'manager', to: 'member', detail: 'Generating reports',
      make: async (user) => {
        const assessment = await assessmentFor(user, 'completed');
        return { path: `/api/v1/assessments/${assessment.id}/reports`, body: {}, left: () => h.deps.prisma.report.count({ where: { assessmentId: assessment.id } }) };
      },
    },
    {
      what: 'an issue tracker pointed at another repository', role: 'admin', to: 'manager', detail: 'Configuring issue trackers',
      make: async () => {
        const made = await request(h.app).post('/api/v1/issue-export-targets').set(bearer(org.owner.token))
          .send({ kind: 'github', name: `gh ${uniqueSuffix()}`, repository: 'acme/web', token: 'ghp_pointedRaces0123456789', current_password: TEST_PASSWORD });
        expect(made.status).toBe(201);
        const body = { repository: 'acme/elsewhere', token: 'ghp_pointedRaces9876543210', current_password: TEST_PASSWORD };
        const left = async () => (await h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id: made.body.id } })).repository;
        return { path: `/api/v1/issue-export-targets/${made.body.id}`, method: 'patch', body, left };
      },
    },
    {
      what: 'an integration bound to a team', role: 'admin', to: 'manager', detail: 'Binding integrations to teams',
      make: async () => {
        const made = await request(h.app).post('/api/v1/integrations').set(bearer(org.owner.token))
          .send({ kind: 'github', name: `GitHub ${uniqueSuffix()}`, token: 'ghp_bindingRaces0123456789', current_password: TEST_PASSWORD });
        expect(made.status).toBe(201);
        const team = await request(h.app).post('/api/v1/teams').set(bearer(org.owner.token)).send({ name: `Team ${uniqueSuffix()}` });
        expect(team.status).toBe(201);
        return { path: `/api/v1/integrations/${made.body.id}/teams/${team.body.id}`, method: 'put', left: () => h.deps.prisma.teamIntegration.count({ where: { teamId: team.body.id } }) };
      },
    },
    {
      what: 'a test delivery sent', role: 'admin', to: 'manager', detail: 'Sending test deliveries',
      make: async () => {
        const id = await subscribe(h, org.owner.token, { org: true }, ['finding.created']);
        return { path: `/api/v1/webhooks/subscriptions/${id}/test`, left: () => h.deps.prisma.webhookDelivery.count({ where: { subscriptionId: id } }) };
      },
    },
    {
      what: 'a test message sent to a notification target', role: 'admin', to: 'manager', detail: 'Sending test messages',
      make: async () => {
        const made = await request(h.app).post('/api/v1/notification-targets').set(bearer(org.owner.token))
          .send({ kind: 'slack', name: `chat ${uniqueSuffix()}`, url: PUBLIC_URL, events: ['report.ready'] });
        expect(made.status).toBe(201);
        return { path: `/api/v1/notification-targets/${made.body.id}/test`, left: () => h.deps.prisma.webhookDelivery.count({ where: { subscriptionId: made.body.id } }) };
      },
    },
    ...(['resend', 'recover'] as const).map((how) => ({
      what: `a failed delivery's ${how}`, role: 'admin' as const, to: 'manager' as const,
      detail: how === 'resend' ? 'Resending webhook deliveries' : 'Recovering webhook deliveries',
      make: async (): Promise<Setup> => {
        const id = await subscribe(h, org.owner.token, { org: true }, ['finding.created']);
        const sent = await request(h.app).post(`/api/v1/webhooks/subscriptions/${id}/test`).set(bearer(org.owner.token));
        expect(sent.status).toBe(202);
        await h.deps.prisma.webhookDelivery.update({ where: { id: sent.body.delivery_id }, data: { status: 'failed' } });
        const left = async () => (await h.deps.prisma.webhookDelivery.findMany({ where: { subscriptionId: id }, select: { id: true, recoveredAt: true } }));
        return how === 'resend'
          ? { path: `/api/v1/webhooks/deliveries/${sent.body.delivery_id}/resend`, left }
          : { path: `/api/v1/webhooks/subscriptions/${id}/recover`, body: { since: new Date(Date.now() - 60_000).toISOString() }, left };
      },
    })),
  );

  it.each(cases)('$what', async ({ role, to, detail, make }) => {
    const user = await createUserInOrg(h, org.id, role, `demoted-${role}`);
    const { path, method = 'post', body, left } = await make(user);
    const before = await left();
    const res = await changedWhileHeld(org.id, user, to, () => request(h.app)[method](path).set(bearer(user.token)).send(body ?? {}).then((r) => r));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: `${detail} needs a role you no longer hold (yours is now ${to}).` });
    expect(await left()).toEqual(before);
  });

  it.each([
    ['a webhook subscription created', 'post', () => '/api/v1/webhooks/subscriptions', { name: 'after the demotion', url: PUBLIC_URL, events: ['finding.created'] }],
    ['a webhook subscription pointed elsewhere', 'patch', (id: string) => `/api/v1/webhooks/subscriptions/${id}`, { url: 'https://203.0.114.11/elsewhere' }],
    ['a notification target created', 'post', () => '/api/v1/notification-targets', { kind: 'slack', name: 'after the demotion', url: PUBLIC_URL, events: ['report.ready'] }],
  ] as const)('%s by an admin demoted to manager meanwhile: refused (403), no route made or changed', async (_what, method, path, body) => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'routing-admin');
    const existing = await subscribe(h, org.owner.token, { org: true }, ['finding.created']);
    const routes = async () => h.deps.prisma.webhookSubscription.findMany({ where: { organizationId: org.id }, select: { id: true, url: true }, orderBy: { id: 'asc' } });
    const before = await routes();
    const res = await changedWhileHeld(org.id, admin, 'manager', () =>
      request(h.app)[method](path(existing)).set(bearer(admin.token)).send({ ...body, current_password: TEST_PASSWORD }).then((r) => r),
    );
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: 'Routing events requires the admin or owner role, which you no longer hold.' });
    expect(await routes()).toEqual(before);
  });

  it("an engine's API key completing an assessment while its creator is demoted to member: refused (403), the assessment still running", async () => {
    const manager = await createUserInOrg(h, org.id, 'manager', 'engine-owner');
    const assessment = await assessmentFor(manager, 'running');
    const key = await createKey(h, manager.token, ['assessments:update']);
    const res = await changedWhileHeld(org.id, manager, 'member', () =>
      request(h.app).post(`/api/v1/assessments/${assessment.id}/complete`).set(bearer(key)).send({ summary: 'done' }).then((r) => r),
    );
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: 'Completing assessments needs a role you no longer hold (yours is now member).' });
    expect(await statusOf(assessment.id)()).toBe('running');
    expect(await eventsOf(h, org.id, 'assessment.completed', { assessment_id: assessment.id })).toEqual([]);
  });

  it('a project created by an admin demoted to manager meanwhile: made (201), with the write grant the manager needs to reach it', async () => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'creating-admin');
    const res = await changedWhileHeld(org.id, admin, 'manager', () => request(h.app).post('/api/v1/projects').set(bearer(admin.token)).send({ name: `Made ${uniqueSuffix()}` }).then((r) => r));
    expect(res.status).toBe(201);
    expect(await h.deps.prisma.accessGrant.findMany({ where: { projectId: res.body.id }, select: { userId: true, access: true } })).toEqual([{ userId: admin.id, access: 'write' }]);
    expect((await request(h.app).get(`/api/v1/projects/${res.body.id}`).set(bearer(admin.token))).status).toBe(200);
  });

  it("an assessment's source uploaded by an admin demoted to manager while it streamed: refused (403), no archive, no stored object left", async () => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'uploading-admin');
    const project = await insertProject(h, org.id);
    const assessment = await insertAssessmentIn(h, org.id, project.id, 'draft');
    const zip = buildZip([{ name: 'src/app.ts', data: Buffer.from('export const answer = 42;\n') }]);
    const res = await changedWhileHeld(org.id, admin, 'manager', () =>
      request(h.app).post(`/api/v1/assessments/${assessment.id}/source`).set(bearer(admin.token)).set('Content-Type', 'application/zip').send(zip).then((r) => r),
    );
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: 'Uploading source needs a role you no longer hold (yours is now manager).' });
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: assessment.id } })).toBe(0);
    expect(await h.deps.storage.list(`orgs/${org.id}/projects/${project.id}/`)).toEqual([]);
  });

  it.each([
    ['confirms', 'confirm', undefined],
    ['reassigns', 'reassign', { assignee_user_id: null }],
  ] as const)("a finding a member %s while their write grant is revoked: 404, the finding unchanged", async (_what, action, body) => {
    const member = await createUserInOrg(h, org.id, 'member', 'triaging-member');
    const project = await insertProject(h, org.id);
    const grant = await insertGrant(h, org.id, { projectId: project.id }, { userId: member.id }, 'write');
    const finding = await insertFinding(h, await insertAssessmentIn(h, org.id, project.id, 'completed'), { assigneeId: member.id });
    const res = await whileRowsHeld(h,
      (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id = ${member.id} FOR NO KEY UPDATE`,
      () => request(h.app).post(`/api/v1/findings/${finding.id}/${action}`).set(bearer(member.token)).send(body ?? {}).then((r) => r),
      1,
      (tx) => tx.accessGrant.delete({ where: { id: grant.id } }),
    );
    expect(res.status).toBe(404);
    expect(res.body.detail).toMatch(/^Finding/);
    expect(await findingOf(finding.id)()).toEqual({ status: 'open', severity: 'high', assigneeId: member.id });
    expect(await eventsOf(h, org.id, 'finding.status_changed', { finding_id: finding.id })).toEqual([]);
  });
});

it("two managers revoking each other's write grant at once: one revocation wins (204), the other finds its own access gone (404), never a deadlock's 409", async () => {
  const project = await insertProject(h, org.id);
  const first = await createUserInOrg(h, org.id, 'manager', 'lead-one');
  const second = await createUserInOrg(h, org.id, 'manager', 'lead-two');
  const firsts = await insertGrant(h, org.id, { projectId: project.id }, { userId: first.id }, 'write');
  const seconds = await insertGrant(h, org.id, { projectId: project.id }, { userId: second.id }, 'write');
  const revoke = (by: TestUser, grantId: string) => request(h.app).delete(`/api/v1/projects/${project.id}/access/${grantId}`).set(bearer(by.token)).then((r) => r);
  // Both grants held FOR KEY SHARE here: each request's check of its own grant (FOR SHARE) passes, its DELETE waits.
  const results = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM access_grants WHERE id IN (${firsts.id}, ${seconds.id}) FOR KEY SHARE`,
    () => Promise.all([revoke(first, seconds.id), revoke(second, firsts.id)]),
    2,
  );
  expect(results.map((r) => r.status).sort()).toEqual([204, 404]);
  expect(await h.deps.prisma.accessGrant.count({ where: { id: { in: [firsts.id, seconds.id] } } })).toBe(1);
});

it("a team deleted by one admin while another binds an integration to it and is demoted by the first: all three land (bind 200, deletion 204, demotion 200), never a deadlock's 409", async () => {
  // The demotion locks both memberships in user-id order: the binding admin's first.
  const binder = await createUserInOrg(h, org.id, 'admin', 'binding-admin');
  const deleter = await createUserInOrg(h, org.id, 'admin', 'deleting-admin');
  expect(binder.id < deleter.id).toBe(true);
  const integration = await request(h.app).post('/api/v1/integrations').set(bearer(org.owner.token))
    .send({ kind: 'github', name: `GitHub ${binder.id}`, token: 'ghp_threeWayRace0123456789', current_password: TEST_PASSWORD });
  expect(integration.status).toBe(201);
  const team = await request(h.app).post('/api/v1/teams').set(bearer(org.owner.token)).send({ name: `Bound ${binder.id}` });
  expect(team.status).toBe(201);
  // The bind queues first, then the deletion, then the demotion; the team's row held until all three wait.
  const [bind, deletion, demotion] = await queuedBehind(h, 'SELECT id FROM teams WHERE id = $1 FOR UPDATE', [team.body.id], [
    () => request(h.app).put(`/api/v1/integrations/${integration.body.id}/teams/${team.body.id}`).set(bearer(binder.token)),
    () => request(h.app).delete(`/api/v1/teams/${team.body.id}`).set(bearer(deleter.token)),
    () => request(h.app).patch(`/api/v1/members/${binder.id}`).set(bearer(deleter.token)).send({ role: 'member' }),
  ]);
  expect([bind!.status, deletion!.status, demotion!.status]).toEqual([200, 204, 200]);
  expect(await roleOf(binder.id)).toBe('member');
  expect(await h.deps.prisma.team.count({ where: { id: team.body.id } })).toBe(0);
});
