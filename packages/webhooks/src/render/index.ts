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
export * from './sentinel';
export * from './cef';
