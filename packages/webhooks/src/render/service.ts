// payload_format `service`: the envelope itself as deterministic JSON.
import { canonicalJsonBuffer } from '../canonical-json';
import type { Envelope } from '../envelope';
import type { RenderedPayload } from './options';

export const JSON_CONTENT_TYPE = 'application/json';

export function renderService(envelope: Envelope): RenderedPayload {
  return { body: canonicalJsonBuffer(envelope), contentType: JSON_CONTENT_TYPE };
}
