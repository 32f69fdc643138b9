// A request authorized with the role its caller held when it started, and a demotion committed while it ran (its
// password check, a bcrypt comparison, held open here): what the request writes is checked against the role as
// committed (lockOwnRole), so a demoted admin cannot leave behind an invitation or an API key beyond the new role.
import bcrypt from 'bcrypt';
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, TEST_PASSWORD, type TestOrg, type TestUser } from './support/fixtures';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
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
