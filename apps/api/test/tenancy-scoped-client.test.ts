// The scoped client of the data layer (scopedTo in @svc/db): through it, another organization's rows are
// invisible and untouchable, and a create naming another organization is refused, against the real database.
import { randomUUID } from 'node:crypto';
import { CrossTenantWriteError, newId, organizationOf, scopedTo, type PrismaClient } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { createOrg, insertAssessment, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { insertFinding } from './support/domain';

let h: Harness;
let mine: TestOrg;
let theirs: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  [mine, theirs] = [await createOrg(h), await createOrg(h)];
});
afterAll(() => h.close());

describe('scopedTo(prisma, tenant)', () => {
  it('reads only the tenant organization rows, even when asked by id or for another organization', async () => {
    const own = await insertProject(h, mine.id);
    const foreign = await insertProject(h, theirs.id);
    const db = scopedTo(h.deps.prisma, { organizationId: mine.id });

    expect(await db.project.findFirst({ where: { id: foreign.id } })).toBeNull();
    expect(await db.project.findUnique({ where: { id: foreign.id } })).toBeNull();
    expect(await db.project.findFirst({ where: { id: own.id } })).toMatchObject({ id: own.id });
    // A caller-supplied organization filter cannot widen the scope.
    expect(await db.project.findMany({ where: { organizationId: theirs.id } })).toEqual([]);
    const listed = await db.project.findMany({ where: { id: { in: [own.id, foreign.id] } } });
    expect(listed.map((p) => p.id)).toEqual([own.id]);
    expect(await db.project.count({ where: { id: foreign.id } })).toBe(0);
  });

  it('cannot change or delete another organization rows', async () => {
    const foreign = await insertProject(h, theirs.id, 'untouched');
    const db = scopedTo(h.deps.prisma, { organizationId: mine.id });

    expect((await db.project.updateMany({ where: { id: foreign.id }, data: { name: 'taken' } })).count).toBe(0);
    await expect(db.project.update({ where: { id: foreign.id }, data: { name: 'taken' } })).rejects.toThrow();
    expect((await db.project.deleteMany({ where: { id: foreign.id } })).count).toBe(0);
    expect(await h.deps.prisma.project.findUnique({ where: { id: foreign.id } })).toMatchObject({ name: 'untouched' });
  });

  it('refuses to create a row for another organization, and scopes transactions too', async () => {
    const db = scopedTo(h.deps.prisma, { organizationId: mine.id });
    const id = newId('prj');
    await expect(db.project.create({ data: { id, organizationId: theirs.id, name: 'planted' } })).rejects.toThrow(CrossTenantWriteError);
    expect(await h.deps.prisma.project.findUnique({ where: { id } })).toBeNull();

    const foreign = await insertProject(h, theirs.id);
    const seen = await db.$transaction(async (tx) => tx.project.findFirst({ where: { id: foreign.id } }));
    expect(seen).toBeNull();
  });
});

// One row of `org` per model, written through the raw client: its unique filter and a change of a non-null column.
type Model = Exclude<keyof PrismaClient, `$${string}` | symbol>;
interface Planted {
  where: Record<string, unknown>;
  change: Record<string, unknown>;
}
const unique = () => randomUUID();

const PLANT: Partial<Record<Model, (org: TestOrg) => Promise<Planted>>> = {
  membership: async (org) => ({ where: { userId: org.member.id }, change: { role: 'admin' } }),
  invitation: async (org) => {
    const row = await h.deps.prisma.invitation.create({
      data: { id: newId('inv'), organizationId: org.id, email: `${unique()}@example.test`, role: 'member', tokenHash: unique(), invitedById: org.owner.id, expiresAt: new Date(Date.now() + 3600_000) },
    });
    return { where: { id: row.id }, change: { role: 'admin' } };
  },
  session: async (org) => {
    const row = await h.deps.prisma.session.create({ data: { id: newId('ses'), organizationId: org.id, userId: org.member.id, expiresAt: new Date(Date.now() + 3600_000) } });
    return { where: { id: row.id }, change: { expiresAt: new Date(0) } };
  },
  team: async (org) => {
    const row = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: org.id, name: `team ${unique()}` } });
    return { where: { id: row.id }, change: { name: `taken ${unique()}` } };
  },
  teamMember: async (org) => {
    const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: org.id, name: `team ${unique()}` } });
    await h.deps.prisma.teamMember.create({ data: { teamId: team.id, userId: org.member.id } });
    return { where: { teamId: team.id, userId: org.member.id }, change: { createdAt: new Date(0) } };
  },
  assessment: async (org) => {
    const row = await insertAssessment(h, org.id, (await insertProject(h, org.id)).id);
    return { where: { id: row.id }, change: { name: 'taken' } };
  },
  accessGrant: async (org) => {
    const row = await insertGrant(h, org.id, { projectId: (await insertProject(h, org.id)).id }, { userId: org.member.id }, 'read');
    return { where: { id: row.id }, change: { access: 'write' } };
  },
  apiKey: async (org) => {
    const row = await h.deps.prisma.apiKey.create({
      data: { id: newId('key'), organizationId: org.id, userId: org.member.id, name: 'ci', displayPrefix: 'sk-svc-Test', keyHash: unique(), scopes: [] },
    });
    return { where: { id: row.id }, change: { name: 'taken' } };
  },
  finding: async (org) => {
    const project = await insertProject(h, org.id);
    const row = await insertFinding(h, await insertAssessment(h, org.id, project.id));
    return { where: { id: row.id }, change: { severity: 'low' } };
  },
  report: async (org) => {
    const assessment = await insertAssessment(h, org.id, (await insertProject(h, org.id)).id);
    const row = await h.deps.prisma.report.create({ data: { id: newId('rpt'), organizationId: org.id, assessmentId: assessment.id, title: 'r' } });
    return { where: { id: row.id }, change: { title: 'taken' } };
  },
  fixVerification: async (org) => {
    const project = await insertProject(h, org.id);
    const finding = await insertFinding(h, await insertAssessment(h, org.id, project.id));
    const row = await h.deps.prisma.fixVerification.create({ data: { id: newId('fxv'), organizationId: org.id, findingId: finding.id } });
    return { where: { id: row.id }, change: { status: 'completed' } };
  },
  prReview: async (org) => {
    const project = await insertProject(h, org.id);
    const row = await h.deps.prisma.prReview.create({
      data: { id: newId('prr'), organizationId: org.id, projectId: project.id, repository: 'o/r', prNumber: 1, verdict: 'approved', findingsCount: 0 },
    });
    return { where: { id: row.id }, change: { verdict: 'changes_requested' } };
  },
  usageRecord: async (org) => {
    const row = await h.deps.prisma.usageRecord.create({ data: { id: newId('use'), organizationId: org.id, credits: '1.00' } });
    return { where: { id: row.id }, change: { credits: '99.00' } };
  },
  spendLimit: async (org) => {
    const row = await h.deps.prisma.spendLimit.create({ data: { id: newId('lim'), organizationId: org.id, kind: 'threshold', credits: '5.00' } });
    return { where: { id: row.id }, change: { credits: '99.00' } };
  },
  auditEvent: async (org) => {
    const row = await h.deps.prisma.auditEvent.create({ data: { id: newId('aud'), organizationId: org.id, actorType: 'system', action: 'api_key.revoked' } });
    return { where: { id: row.id }, change: { action: 'taken' } };
  },
  webhookSubscription: async (org) => {
    const row = await h.deps.prisma.webhookSubscription.create({
      data: { id: newId('whsub'), organizationId: org.id, level: 'organization', name: 'w', url: 'https://example.test/h', events: [], severityFilter: [], statusFilter: [], secretEnc: 'x' },
    });
    return { where: { id: row.id }, change: { name: 'taken' } };
  },
};

type Delegate = {
  findFirst(args: unknown): Promise<unknown>;
  findMany(args: unknown): Promise<unknown[]>;
  count(args: unknown): Promise<number>;
  updateMany(args: unknown): Promise<{ count: number }>;
  deleteMany(args: unknown): Promise<{ count: number }>;
};
const delegate = (client: object, model: Model) => (client as Record<Model, Delegate>)[model];

describe.each(Object.keys(PLANT) as Model[])('scopedTo(...).%s', (model) => {
  it("sees, counts, changes and deletes only the tenant organization's rows", async () => {
    const own = await PLANT[model]!(mine);
    const foreign = await PLANT[model]!(theirs);
    const db = delegate(scopedTo(h.deps.prisma, { organizationId: mine.id }), model);
    const raw = delegate(h.deps.prisma, model);

    expect(await db.findFirst({ where: foreign.where })).toBeNull();
    expect(await db.findFirst({ where: own.where })).not.toBeNull();
    expect(await db.findMany({ where: { OR: [own.where, foreign.where] } })).toHaveLength(1);
    expect(await db.count({ where: foreign.where })).toBe(0);
    expect((await db.updateMany({ where: foreign.where, data: foreign.change })).count).toBe(0);
    expect((await db.deleteMany({ where: foreign.where })).count).toBe(0);
    // The other organization's row is still there, unchanged; the tenant's own can be changed.
    expect(await raw.count({ where: { ...foreign.where, NOT: foreign.change } })).toBe(1);
    expect((await db.updateMany({ where: own.where, data: own.change })).count).toBe(1);
  });
});

describe('scoped writes', () => {
  it('stamps the organization on a create that names none, and refuses to move a row to another organization', async () => {
    const db = scopedTo(h.deps.prisma, { organizationId: mine.id });
    const id = newId('use');
    // The type asks for organizationId; at run time the scoped client supplies it.
    await db.usageRecord.create({ data: { id, credits: '1.00' } as never });
    expect(await h.deps.prisma.usageRecord.findUnique({ where: { id } })).toMatchObject({ organizationId: mine.id });
    await expect(db.usageRecord.updateMany({ where: { id }, data: { organizationId: theirs.id } })).rejects.toThrow(CrossTenantWriteError);
    expect(await h.deps.prisma.usageRecord.findUnique({ where: { id } })).toMatchObject({ organizationId: mine.id });
  });

  it('refuses an upsert that would create a row for another organization', async () => {
    const db = scopedTo(h.deps.prisma, { organizationId: mine.id });
    const id = newId('use');
    await expect(
      db.usageRecord.upsert({ where: { id }, create: { id, organizationId: theirs.id, credits: '1.00' }, update: {} }),
    ).rejects.toThrow(CrossTenantWriteError);
    expect(await h.deps.prisma.usageRecord.findUnique({ where: { id } })).toBeNull();
  });

  it("adds a member only to the tenant's own teams", async () => {
    const db = scopedTo(h.deps.prisma, { organizationId: mine.id });
    const foreignTeam = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: theirs.id, name: `team ${unique()}` } });
    await expect(db.teamMember.create({ data: { teamId: foreignTeam.id, userId: mine.member.id } })).rejects.toThrow(CrossTenantWriteError);
    await expect(
      db.teamMember.upsert({ where: { teamId_userId: { teamId: foreignTeam.id, userId: mine.member.id } }, create: { teamId: foreignTeam.id, userId: mine.member.id }, update: {} }),
    ).rejects.toThrow(CrossTenantWriteError);
    expect(await h.deps.prisma.teamMember.count({ where: { teamId: foreignTeam.id } })).toBe(0);

    const ownTeam = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: mine.id, name: `team ${unique()}` } });
    await db.teamMember.create({ data: { teamId: ownTeam.id, userId: mine.member.id } });
    expect(await db.teamMember.count({ where: { teamId: ownTeam.id } })).toBe(1);
  });

  it('scopes a transaction opened elsewhere (scopedTo(tx, tenant)), and says which organization it serves', async () => {
    const foreign = await insertProject(h, theirs.id);
    const seen = await h.deps.prisma.$transaction(async (tx) => {
      const scoped = scopedTo(tx, { organizationId: mine.id });
      expect(organizationOf(scoped)).toBe(mine.id);
      return scoped.project.findFirst({ where: { id: foreign.id } });
    });
    expect(seen).toBeNull();
  });
});
