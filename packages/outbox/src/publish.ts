// The transactional outbox. A domain change calls publishEvent inside its own database transaction: the event
// and one delivery row per matching subscription commit (or roll back) together with the change. After commit
// the deliveries are enqueued; an enqueue lost to a Redis outage or a crash is made good by the relay.
import { newId, Prisma, queryRows, utcTimestamp, type Tx } from '@svc/db';
import { buildEnvelope, subscriptionMatches, type EventType } from '@svc/webhooks';

export interface PublishEventInput {
  type: EventType;
  organizationId: string;
  projectId?: string | null;
  assessmentId?: string | null;
  /** Event-specific fields: public identifiers only. */
  data: Record<string, unknown>;
  /** The test route: deliver to this subscription only, whatever its event list and filters. */
  onlySubscriptionId?: string;
  /** An operational event about this subscription: never delivered to it (it would feed its own failures). */
  exceptSubscriptionId?: string;
}

/** A delivery to enqueue: its id, and its subscription for the fair share of backlogs and the breaker. */
export interface DeliveryRef {
  id: string;
  subscriptionId: string;
  /** The subscription row showed its breaker open until then (epoch ms): enqueued held back (held-back.ts). */
  breakerOpenUntilMs?: number | null;
}

export interface PublishedEvent {
  eventId: string;
  deliveryIds: string[];
  deliveries: DeliveryRef[];
}

/** A subscription an event might go to, as read from webhook_subscriptions. */
export interface CandidateSubscription {
  id: string;
  events: string[];
  severity_filter: string[];
  status_filter: string[];
  has_severity_filter: boolean;
  has_status_filter: boolean;
  payload_format: string;
  /** While the row shows the circuit breaker open: the probe time (epoch ms); null otherwise. */
  breaker_open_until_ms: number | null;
}

/** The candidates' columns: [name, SQL expression]. */
const CANDIDATE_COLUMNS: Array<[string, string]> = [
  ...['id', 'events', 'severity_filter', 'status_filter', 'has_severity_filter', 'has_status_filter', 'payload_format'].map(
    (c): [string, string] => [c, c],
  ),
  // Epoch ms of a timestamp without time zone (stored as UTC): a number, whatever the session's time zone.
  ['breaker_open_until_ms', "CASE WHEN breaker_state = 'open' THEN floor(extract(epoch FROM breaker_until) * 1000)::float8 END"],
];
const CANDIDATE_SELECT = CANDIDATE_COLUMNS.map(([name, expr]) => (name === expr ? name : `${expr} AS ${name}`)).join(', ');

/** Where an event happened: ids, or SQL expressions naming them in a caller's statement. */
export interface EventLevel {
  organizationId: string | Prisma.Sql;
  projectId: string | null | Prisma.Sql;
  assessmentId: string | null | Prisma.Sql;
}

/**
 * The live subscriptions of the organization at the event's level (org-wide ones, its project's, its assessment's)
 * that list its type, and whose recorded configurer still holds an organization-wide role (DESIGN.md, trust
 * boundaries: the API disables such routes when it demotes or removes someone; this also holds when a membership
 * changes by any other path). One probe of the memberships' unique index per candidate.
 */
function liveSubscriptionsFor(type: EventType, at: EventLevel): Prisma.Sql {
  return Prisma.sql`organization_id = ${at.organizationId}
      AND deleted_at IS NULL
      AND status IN ('active', 'failing')
      AND events @> ARRAY[${type}]::text[]
      AND (level = 'organization'
           OR (level = 'project' AND project_id = ${at.projectId})
           OR (level = 'assessment' AND assessment_id = ${at.assessmentId}))
      AND (configured_by_user_id IS NULL OR EXISTS (
           SELECT 1 FROM memberships m
           WHERE m.organization_id = webhook_subscriptions.organization_id
             AND m.user_id = webhook_subscriptions.configured_by_user_id
             AND m.role IN ('owner', 'admin')))`;
}

/**
 * An SQL expression for a caller's own SELECT: the candidate subscriptions of an event as a json array, so that a
 * hot path reads them in a statement it runs anyway (the engine's finding route, with its access check).
 */
export function candidateSubscriptionsJson(type: EventType, at: EventLevel): Prisma.Sql {
  const fields = Prisma.raw(CANDIDATE_COLUMNS.map(([name, expr]) => `'${name}', ${expr}`).join(', '));
  return Prisma.sql`(SELECT coalesce(json_agg(json_build_object(${fields}) ORDER BY id), '[]'::json)
    FROM webhook_subscriptions WHERE ${liveSubscriptionsFor(type, at)})`;
}

/**
 * Candidate subscriptions of an event: the live ones at its level listing its type, or, for the test route, the
 * one subscription named. Raw SQL: this runs on every published event, and a Prisma model query costs more to
 * build than to run.
 */
async function candidateSubscriptions(tx: Tx, input: PublishEventInput): Promise<CandidateSubscription[]> {
  const columns = Prisma.raw(CANDIDATE_SELECT);
  if (input.onlySubscriptionId) {
    return queryRows<CandidateSubscription>(tx, Prisma.sql`
      SELECT ${columns} FROM webhook_subscriptions
      WHERE id = ${input.onlySubscriptionId} AND organization_id = ${input.organizationId} AND deleted_at IS NULL`);
  }
  const at = { organizationId: input.organizationId, projectId: input.projectId ?? null, assessmentId: input.assessmentId ?? null };
  const except = input.exceptSubscriptionId === undefined ? Prisma.empty : Prisma.sql`AND id <> ${input.exceptSubscriptionId}`;
  return queryRows<CandidateSubscription>(tx, Prisma.sql`
    SELECT ${columns} FROM webhook_subscriptions WHERE ${liveSubscriptionsFor(input.type, at)} ${except} ORDER BY id`);
}

/** Of the candidates, those whose filters match the event (the test route's one subscription always does). */
function matching(input: PublishEventInput, candidates: CandidateSubscription[]): CandidateSubscription[] {
  if (input.onlySubscriptionId) return candidates;
  return candidates.filter((s) =>
    subscriptionMatches(
      {
        events: s.events,
        severityFilter: s.has_severity_filter ? s.severity_filter : null,
        statusFilter: s.has_status_filter ? s.status_filter : null,
      },
      { type: input.type, data: input.data },
    ),
  );
}

/** An event about to be written: its id, and one delivery (with its envelope) per matching subscription. */
export interface PlannedEvent {
  input: PublishEventInput;
  eventId: string;
  now: Date;
  deliveries: Array<{ id: string; subscriptionId: string; payload: string; payloadFormat: string; breakerOpenUntilMs: number | null }>;
}

/**
 * Reads the subscriptions the event goes to (one statement) and plans its deliveries. `db` may be a transaction's
 * client or the pool's: which subscriptions match is read, not locked, either way.
 */
export async function planEvent(db: Tx, input: PublishEventInput, now: Date = new Date()): Promise<PlannedEvent> {
  return planEventFor(input, await candidateSubscriptions(db, input), now);
}

/** The event's id, and one delivery with its envelope per candidate whose filters match. */
export function planEventFor(input: PublishEventInput, candidates: CandidateSubscription[], now: Date = new Date()): PlannedEvent {
  const eventId = newId('event', now.getTime());
  const deliveries = matching(input, candidates).map((subscription) => {
    const id = newId('whdel', now.getTime());
    const envelope = buildEnvelope({
      deliveryId: id,
      eventId,
      type: input.type,
      createdAt: now,
      organizationId: input.organizationId,
      data: input.data,
    });
    // payload_format fixed now: a later change of the subscription's format does not change what retries send.
    return {
      id,
      subscriptionId: subscription.id,
      payload: JSON.stringify(envelope),
      payloadFormat: subscription.payload_format,
      breakerOpenUntilMs: subscription.breaker_open_until_ms ?? null,
    };
  });
  return { input, eventId, now, deliveries };
}

/**
 * The data-modifying CTEs `e` (the event) and `d` (its deliveries) that write a planned event, for a statement of
 * the caller's: `WITH <change>, ${eventWriteCtes(plan, 'change')} SELECT ...`. With `onlyIfRowsIn`, the event is
 * written only when that CTE returned rows (a change that happened), so the change, the event and the deliveries
 * commit in ONE statement, atomically, without a transaction around them.
 */
export function eventWriteCtes(plan: PlannedEvent, onlyIfRowsIn?: string): Prisma.Sql {
  const { input, eventId, now, deliveries } = plan;
  const gate = onlyIfRowsIn === undefined ? Prisma.empty : Prisma.sql`WHERE EXISTS (SELECT 1 FROM ${Prisma.raw(onlyIfRowsIn)})`;
  const column = <K extends keyof PlannedEvent['deliveries'][number]>(key: K) => deliveries.map((d) => d[key]);
  // The deliveries as arrays (unnest), not a VALUES list: the statement's text is the same for any number of them,
  // so a caller may prepare it. updated_at: the write's own time, as Prisma's @updatedAt would set it.
  return Prisma.sql`e AS (
    INSERT INTO events (id, organization_id, type, project_id, assessment_id, data, created_at)
    SELECT ${eventId}, ${input.organizationId}, ${input.type}, ${input.projectId ?? null}, ${input.assessmentId ?? null},
           ${JSON.stringify(input.data)}::jsonb, ${utcTimestamp(now)} ${gate}
    RETURNING id), d AS (
    INSERT INTO webhook_deliveries (id, organization_id, subscription_id, event_id, event_type, payload, payload_format, created_at, updated_at)
    SELECT v.id, ${input.organizationId}, v.subscription_id, e.id, ${input.type}, v.payload::jsonb, v.payload_format,
           ${utcTimestamp(now)}, ${utcTimestamp(new Date())}
    FROM e CROSS JOIN unnest(${column('id')}::text[], ${column('subscriptionId')}::text[], ${column('payload')}::text[],
                             ${column('payloadFormat')}::text[]) AS v(id, subscription_id, payload, payload_format)
    RETURNING id)`;
}

/**
 * eventWriteCtes for many planned events in one statement: `e` and `d` write each event, and its deliveries, only
 * when the CTE `gate` returned a row whose id is the event's `whenRowIn` (the change it is about happened). Each
 * event keeps its own organization, level and data; deliveries join only their own event. The values go in as
 * arrays, so the statement's text is the same for any number of events (one prepared statement).
 */
export function eventsWriteCtes(events: Array<{ plan: PlannedEvent; whenRowIn: string }>, gate: string): Prisma.Sql {
  const ev = <T>(of: (plan: PlannedEvent) => T) => events.map(({ plan }) => of(plan));
  const deliveries = events.flatMap(({ plan }) => plan.deliveries.map((d) => ({ ...d, eventId: plan.eventId })));
  const dv = <T>(of: (d: (typeof deliveries)[number]) => T) => deliveries.map(of);
  return Prisma.sql`e AS (
    INSERT INTO events (id, organization_id, type, project_id, assessment_id, data, created_at)
    SELECT v.id, v.organization_id, v.type, v.project_id, v.assessment_id, v.data::jsonb, v.created_at AT TIME ZONE 'UTC'
    FROM unnest(${ev((p) => p.eventId)}::text[], ${ev((p) => p.input.organizationId)}::text[], ${ev((p) => p.input.type)}::text[],
                ${ev((p) => p.input.projectId ?? null)}::text[], ${ev((p) => p.input.assessmentId ?? null)}::text[],
                ${ev((p) => JSON.stringify(p.input.data))}::text[], ${ev((p) => p.now.toISOString())}::timestamptz[],
                ${events.map((x) => x.whenRowIn)}::text[])
         AS v(id, organization_id, type, project_id, assessment_id, data, created_at, gate_id)
    WHERE v.gate_id IN (SELECT id FROM ${Prisma.raw(gate)})
    RETURNING id, organization_id, type, created_at), d AS (
    INSERT INTO webhook_deliveries (id, organization_id, subscription_id, event_id, event_type, payload, payload_format, created_at, updated_at)
    SELECT v.id, e.organization_id, v.subscription_id, e.id, e.type, v.payload::jsonb, v.payload_format, e.created_at, ${utcTimestamp(new Date())}
    FROM unnest(${dv((d) => d.id)}::text[], ${dv((d) => d.eventId)}::text[], ${dv((d) => d.subscriptionId)}::text[],
                ${dv((d) => d.payload)}::text[], ${dv((d) => d.payloadFormat)}::text[]) AS v(id, event_id, subscription_id, payload, payload_format)
    JOIN e ON e.id = v.event_id
    RETURNING id)`;
}

export const publishedOf = (plan: PlannedEvent): PublishedEvent => ({
  eventId: plan.eventId,
  deliveryIds: plan.deliveries.map((d) => d.id),
  deliveries: plan.deliveries.map((d) => ({ id: d.id, subscriptionId: d.subscriptionId, breakerOpenUntilMs: d.breakerOpenUntilMs })),
});

/**
 * Writes the event and one delivery per matching subscription in the caller's transaction: two statements (the
 * subscriptions, then the event and its deliveries in one statement).
 */
export async function publishEvent(tx: Tx, input: PublishEventInput, now: Date = new Date()): Promise<PublishedEvent> {
  const plan = await planEvent(tx, input, now);
  await tx.$queryRaw`WITH ${eventWriteCtes(plan)} SELECT 1`;
  return publishedOf(plan);
}
