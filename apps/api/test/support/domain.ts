// Helpers for the tests of domain actions and the events they publish: engine API keys, webhook subscriptions at
// the three levels, assessments and findings arranged in a given state, and reading back events and deliveries.
import request from 'supertest';
import type { Finding } from '@svc/db';
import { newId } from '@svc/db';
import type { Harness } from './harness';
import { uniqueSuffix } from './harness';
import { bearer } from './fixtures';

export const PUBLIC_URL = 'https://203.0.114.10/hooks'; // outside the documentation ranges: a public address

/** An API key minted through the API by `token`'s user, with exactly `scopes`. */
export async function createKey(h: Harness, token: string, scopes: string[]): Promise<string> {
  const res = await request(h.app).post('/api/v1/api-keys').set(bearer(token)).send({ name: `key ${uniqueSuffix()}`, scopes });
  if (res.status !== 201) throw new Error(`api key creation failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.key;
}

export type Level = { org: true } | { projectId: string } | { assessmentId: string };

function webhooksBase(level: Level): string {
  if ('projectId' in level) return `/api/v1/projects/${level.projectId}/webhooks`;
  if ('assessmentId' in level) return `/api/v1/assessments/${level.assessmentId}/webhooks`;
  return '/api/v1/webhooks';
}

/** A webhook subscription created through the API; returns its id. */
export async function subscribe(h: Harness, token: string, level: Level, events: string[], extra: Record<string, unknown> = {}) {
  const res = await request(h.app)
    .post(`${webhooksBase(level)}/subscriptions`)
    .set(bearer(token))
    .send({ name: `sub ${uniqueSuffix()}`, url: PUBLIC_URL, events, ...extra });
  if (res.status !== 201) throw new Error(`subscription creation failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

/** An assessment written straight to the database in the given state. */
export async function insertAssessmentIn(
  h: Harness,
  organizationId: string,
  projectId: string,
  status: string,
  extra: Record<string, unknown> = {},
) {
  return h.deps.prisma.assessment.create({
    data: { id: newId('asm'), organizationId, projectId, name: `Assessment ${uniqueSuffix()}`, status, ...extra },
  });
}

/** A finding written straight to the database (status open unless told otherwise). */
export async function insertFinding(
  h: Harness,
  a: { id: string; organizationId: string; projectId: string },
  extra: Partial<Pick<Finding, 'status' | 'severity' | 'title' | 'location' | 'fingerprint' | 'openedAt' | 'description' | 'assigneeId' | 'slaBreachedAt'>> = {},
): Promise<Finding> {
  const severity = extra.severity ?? 'high';
  return h.deps.prisma.finding.create({
    data: {
      id: newId('fnd'),
      organizationId: a.organizationId,
      projectId: a.projectId,
      assessmentId: a.id,
      fingerprint: `fp-${uniqueSuffix()}`,
      title: `Finding ${uniqueSuffix()}`,
      severity,
      originalSeverity: severity,
      ...extra,
    },
  });
}

export interface StoredEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
  projectId: string | null;
  assessmentId: string | null;
}

/** Events of one type in an organization, optionally those whose data has `field` = `value`; oldest first. */
export async function eventsOf(
  h: Harness,
  organizationId: string,
  type: string,
  match: Record<string, string> = {},
): Promise<StoredEvent[]> {
  const rows = await h.deps.prisma.event.findMany({ where: { organizationId, type }, orderBy: { id: 'asc' } });
  return rows
    .map((r) => ({ id: r.id, type: r.type, data: r.data as Record<string, unknown>, projectId: r.projectId, assessmentId: r.assessmentId }))
    .filter((e) => Object.entries(match).every(([k, v]) => e.data[k] === v));
}

/** The deliveries of one event, by subscription id. */
export async function deliveriesOf(h: Harness, eventId: string) {
  const rows = await h.deps.prisma.webhookDelivery.findMany({ where: { eventId } });
  return new Map(rows.map((d) => [d.subscriptionId, d]));
}

const FORBIDDEN_IN_DATA = [/whsec_/, /sk-svc-/, /"(secret|token|password|authorization|organization_id|description)"/i];

/**
 * Checks the delivery envelope of `eventId` for subscription `subscriptionId`: its type, data.kind and data
 * (exactly `data` plus kind), every *_id field a public prefixed id, and nothing secret-looking anywhere.
 */
export async function expectDelivered(
  h: Harness,
  organizationId: string,
  eventId: string,
  subscriptionId: string,
  type: string,
  data: Record<string, unknown>,
) {
  const deliveries = await deliveriesOf(h, eventId);
  const delivery = deliveries.get(subscriptionId);
  if (!delivery) throw new Error(`no delivery of ${type} ${eventId} to ${subscriptionId}`);
  const envelope = delivery.payload as Record<string, unknown>;
  expect(envelope).toEqual({
    id: delivery.id,
    event_id: eventId,
    type,
    created_at: expect.any(String),
    organization_id: organizationId,
    data: { kind: type, ...data },
  });
  expect(delivery.id).toMatch(/^whdel_[0-9a-z]{26}$/);
  expectPublicData(envelope.data as Record<string, unknown>);
}

/** Every *_id value is a public prefixed id; no secret-looking key or value. */
export function expectPublicData(data: Record<string, unknown>) {
  for (const [key, value] of Object.entries(data)) {
    if (key.endsWith('_id')) expect(value).toMatch(/^(fnd|asm|prj)_[0-9a-z]{26}$/);
  }
  const text = JSON.stringify(data);
  for (const pattern of FORBIDDEN_IN_DATA) expect(text).not.toMatch(pattern);
}

/** A report written straight to the database as the worker leaves it once rendered (status ready, a PDF stored). */
export async function insertReadyReport(
  h: Harness,
  organizationId: string,
  assessmentId: string,
  opts: { title?: string; pdf?: Buffer } = {},
) {
  const pdf = opts.pdf ?? Buffer.from(`%PDF-1.3\n% report ${uniqueSuffix()}\n%%EOF\n`);
  return h.deps.prisma.report.create({
    data: {
      id: newId('rpt'),
      organizationId,
      assessmentId,
      title: opts.title ?? `Report ${uniqueSuffix()}`,
      status: 'ready',
      pdf: new Uint8Array(pdf),
      sizeBytes: pdf.length,
      readyAt: new Date(),
    },
    omit: { pdf: true },
  });
}
