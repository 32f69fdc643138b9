// The scoped client of the data layer (scopedTo in @svc/db): through it, another organization's rows are
// invisible and untouchable, and a create naming another organization is refused, against the real database.
import { CrossTenantWriteError, newId, scopedTo } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { createOrg, insertProject, type TestOrg } from './support/fixtures';

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
