// The delivery envelope of SPEC "Delivery envelope (payload_format service)". Every format renders from it.
import { isEventType, type EventType } from './events';

export const DELIVERY_ID_PREFIX = 'whdel_';
export const EVENT_ID_PREFIX = 'event_';

export interface EnvelopeData {
  /** Always equal to the envelope's `type`. */
  kind: string;
  [key: string]: unknown;
}

export interface Envelope {
  /** Delivery id, prefix `whdel_`. */
  id: string;
  /** Event id, prefix `event_`. */
  event_id: string;
  type: EventType;
  /** ISO 8601 UTC timestamp with milliseconds, e.g. `2026-11-02T10:15:30.123Z`. */
  created_at: string;
  organization_id: string;
  data: EnvelopeData;
}

export interface BuildEnvelopeInput {
  deliveryId: string;
  eventId: string;
  type: EventType;
  /** A Date, epoch milliseconds, or a string Date.parse understands; stored as ISO 8601 UTC. */
  createdAt: Date | number | string;
  organizationId: string;
  /** Event-specific fields: public identifiers only. A `kind` given here is overwritten with `type`. */
  data?: Record<string, unknown>;
}

/** Converts a Date, epoch milliseconds or a parseable date string to ISO 8601 UTC (`...Z`). */
export function toIsoUtc(value: Date | number | string): string {
  const date = value instanceof Date ? new Date(value.getTime()) : new Date(value);
  const time = date.getTime();
  if (!Number.isFinite(time)) {
    throw new RangeError(`Invalid timestamp: ${String(value)}`);
  }
  return date.toISOString();
}

/** Builds the envelope; `data.kind` is set to `type` (SPEC). Throws on a wrong prefix or unknown type. */
export function buildEnvelope(input: BuildEnvelopeInput): Envelope {
  const { deliveryId, eventId, type, createdAt, organizationId, data = {} } = input;
  if (typeof deliveryId !== 'string' || !deliveryId.startsWith(DELIVERY_ID_PREFIX) || deliveryId.length === DELIVERY_ID_PREFIX.length) {
    throw new TypeError(`Delivery id must start with ${DELIVERY_ID_PREFIX}`);
  }
  if (typeof eventId !== 'string' || !eventId.startsWith(EVENT_ID_PREFIX) || eventId.length === EVENT_ID_PREFIX.length) {
    throw new TypeError(`Event id must start with ${EVENT_ID_PREFIX}`);
  }
  if (!isEventType(type)) {
    throw new TypeError(`Unknown event type: ${String(type)}`);
  }
  if (typeof organizationId !== 'string' || organizationId.length === 0) {
    throw new TypeError('Organization id is required');
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new TypeError('Event data must be a plain object');
  }
  return {
    id: deliveryId,
    event_id: eventId,
    type,
    created_at: toIsoUtc(createdAt),
    organization_id: organizationId,
    data: { ...data, kind: type },
  };
}

/** Reads a string field of `data`, or undefined when absent or not a string. */
export function dataString(envelope: Envelope, key: string): string | undefined {
  const value = envelope.data[key];
  return typeof value === 'string' ? value : undefined;
}
