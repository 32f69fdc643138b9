// Render options of every format, resolved in one place. Each renderer reads the resolved object only.
import type { Envelope } from '../envelope';

export interface RenderOptions {
  /** Splunk HEC `index`; omitted from the event when not set (the token's default index applies). */
  splunkIndex?: string | null;
  /** Splunk HEC `host`. */
  host?: string;
  /** Splunk HEC `source`. */
  source?: string;
  /** Splunk HEC `sourcetype`. */
  sourcetype?: string;
  /** CEF Device Vendor. */
  vendor?: string;
  /** CEF Device Product. */
  product?: string;
  /** CEF Device Version. */
  version?: string;
}

export interface ResolvedRenderOptions {
  splunkIndex: string | null;
  host: string;
  source: string;
  sourcetype: string;
  vendor: string;
  product: string;
  version: string;
}

export const DEFAULT_RENDER_OPTIONS: Readonly<ResolvedRenderOptions> = Object.freeze({
  splunkIndex: null,
  host: 'security-assessment-service',
  source: 'service:webhooks',
  sourcetype: '_json',
  vendor: 'Service',
  product: 'Security Assessment Service',
  version: '1.0',
});

function pick(value: string | undefined, fallback: string, name: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value.trim() === '') {
    throw new TypeError(`Render option ${name} must be a non-empty string`);
  }
  return value;
}

/** Fills defaults and checks types. An empty or null `splunkIndex` means "no index". */
export function resolveRenderOptions(options: RenderOptions = {}): ResolvedRenderOptions {
  const index = options.splunkIndex;
  if (index !== undefined && index !== null && typeof index !== 'string') {
    throw new TypeError('Render option splunkIndex must be a string');
  }
  return {
    splunkIndex: index === undefined || index === null || index.trim() === '' ? null : index,
    host: pick(options.host, DEFAULT_RENDER_OPTIONS.host, 'host'),
    source: pick(options.source, DEFAULT_RENDER_OPTIONS.source, 'source'),
    sourcetype: pick(options.sourcetype, DEFAULT_RENDER_OPTIONS.sourcetype, 'sourcetype'),
    vendor: pick(options.vendor, DEFAULT_RENDER_OPTIONS.vendor, 'vendor'),
    product: pick(options.product, DEFAULT_RENDER_OPTIONS.product, 'product'),
    version: pick(options.version, DEFAULT_RENDER_OPTIONS.version, 'version'),
  };
}

export interface RenderedPayload {
  body: Buffer;
  contentType: string;
}

export type Renderer = (envelope: Envelope, options: ResolvedRenderOptions) => RenderedPayload;
