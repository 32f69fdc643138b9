// The one registry of payload formats: renderPayload(format, envelope, options) -> { body, contentType }.
import type { Envelope } from '../envelope';
import { isPayloadFormat, type PayloadFormat } from '../events';
import { renderCef } from './cef';
import { resolveRenderOptions, type RenderedPayload, type Renderer, type RenderOptions } from './options';
import { renderSentinel } from './sentinel';
import { renderService } from './service';
import { renderSplunkHec } from './splunk-hec';

export const RENDERERS: Readonly<Record<PayloadFormat, Renderer>> = Object.freeze({
  service: renderService,
  splunk_hec: renderSplunkHec,
  microsoft_sentinel: renderSentinel,
  cef: renderCef,
});

/** Renders an envelope in a payload format. The body is the exact bytes to send and sign. */
export function renderPayload(format: PayloadFormat, envelope: Envelope, options: RenderOptions = {}): RenderedPayload {
  if (!isPayloadFormat(format)) {
    throw new TypeError(`Unknown payload format: ${String(format)}`);
  }
  return RENDERERS[format](envelope, resolveRenderOptions(options));
}

export * from './options';
export * from './service';
export * from './splunk-hec';
// The declared columns per event type stay internal to the renderers (field-mapping.ts, the docs/webhooks.md table); the
// public column list is sentinel-schema.ts, derived from what renderSentinel actually produces.
export {
  SENTINEL_COLUMN_NAME,
  SENTINEL_MAX_COLUMN_NAME_LENGTH,
  SENTINEL_MAX_VALUE_BYTES,
  SENTINEL_RESERVED_COLUMNS,
  type SentinelValue,
  type SentinelRecord,
  type SentinelColumnType,
  sanitizeColumnName,
  claimColumnName,
  allSentinelColumns,
  buildSentinelRecord,
  renderSentinel,
} from './sentinel';
export * from './cef';
export * from './fields';
export * from './field-mapping';
