// Arranging data for tests: organizations with one active user per role, and their session tokens.
// Users are written with the service's own password hashing and sessions issued by the real session service.
import bcrypt from 'bcrypt';
import type { Role } from '@svc/scopes';
import { newId } from '@svc/db';
import { issueSession } from '../../src/modules/auth/sessions';
import type { Harness } from './harness';
import { uniqueSuffix } from './harness';

export const TEST_PASSWORD = 'correct horse battery staple';

export interface TestUser {
  id: string;
  email: string;
  role: Role;
  token: string;
  sessionId: string;
  csrfToken: string;
}

export interface TestOrg {
  id: string;
  name: string;
  owner: TestUser;
  admin: TestUser;
  manager: TestUser;
  member: TestUser;
}

let passwordHash: Promise<string> | undefined;
function testPasswordHash(): Promise<string> {
  passwordHash ??= bcrypt.hash(TEST_PASSWORD, 4);
  return passwordHash;
}

export async function createUserInOrg(h: Harness, organizationId: string, role: Role, label: string = role): Promise<TestUser> {
  const email = `${label}-${uniqueSuffix()}@example.test`;
  const user = await h.deps.prisma.user.create({
    data: {
      id: newId('usr'),
      email,
      name: `${label} user`,
      passwordHash: await testPasswordHash(),
      status: 'active',
      emailVerifiedAt: new Date(),
    },
  });
  await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId, userId: user.id, role } });
  const session = await issueSession(h.deps, user.id, organizationId);
  return { id: user.id, email, role, token: session.token, sessionId: session.sessionId, csrfToken: session.csrfToken };
}

export async function createOrg(h: Harness, name = `Org ${uniqueSuffix()}`): Promise<TestOrg> {
  const org = await h.deps.prisma.organization.create({ data: { id: newId('org'), name } });
  const [owner, admin, manager, member] = await Promise.all(
    (['owner', 'admin', 'manager', 'member'] as const).map((role) => createUserInOrg(h, org.id, role)),
  );
  return { id: org.id, name, owner, admin, manager, member };
}

export const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** A project written straight to the database (no grants): for arranging data, not for testing creation. */
export async function insertProject(h: Harness, organizationId: string, name = `Project ${uniqueSuffix()}`) {
  return h.deps.prisma.project.create({ data: { id: newId('prj'), organizationId, name } });
}

/** An assessment written straight to the database in a project. */
export async function insertAssessment(h: Harness, organizationId: string, projectId: string, name = `Assessment ${uniqueSuffix()}`) {
  return h.deps.prisma.assessment.create({ data: { id: newId('asm'), organizationId, projectId, name } });
}

/** A grant written straight to the database: on a project (assessmentId NULL) or on an assessment (projectId NULL). */
export async function insertGrant(
  h: Harness,
  organizationId: string,
  target: { projectId: string } | { assessmentId: string },
  subject: { userId: string } | { teamId: string },
  access: 'read' | 'write',
) {
  return h.deps.prisma.accessGrant.create({ data: { id: newId('grant'), organizationId, ...target, ...subject, access } });
}
