// What an HTTP exchange means for a delivery (SPEC "Delivery"): any 2xx succeeds; timeouts, network errors and
// every other status (3xx included: redirects are not followed) are failures to retry.
import type { HttpResult } from './post';

export type AttemptOutcome =
  | 'success'
  | 'http_error'
  | 'redirect'
  | 'timeout'
  | 'tls_error'
  | 'network_error'
  | 'payload_too_large'
  | 'unsafe_url'
  | 'render_error'
  | 'token_error'
  // Splunk HEC indexer acknowledgement (hec_ack): accepted and awaiting the ack, no ack by the deadline, no ackId.
  | 'ack_pending'
  | 'ack_timeout'
  | 'ack_missing';

const TLS_ERROR_CODE = /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/;

export function outcomeOfError(error: Error & { code?: string }): AttemptOutcome {
  if (error.name === 'TimeoutError' || error.code === 'ETIMEDOUT') return 'timeout';
  if (error.code && TLS_ERROR_CODE.test(error.code)) return 'tls_error';
  return 'network_error';
}

export function outcomeOfHttp(result: HttpResult): AttemptOutcome {
  if (!result.response) return outcomeOfError(result.error ?? new Error('no response'));
  const { status } = result.response;
  if (status >= 200 && status < 300) return 'success';
  if (status >= 300 && status < 400) return 'redirect';
  return 'http_error';
}

/** The response headers kept in the attempt log. */
export const RECORDED_RESPONSE_HEADERS = [
  'content-type',
  'content-length',
  'date',
  'server',
  'retry-after',
  'location',
  'x-request-id',
] as const;

export function recordedHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of RECORDED_RESPONSE_HEADERS) {
    const value = headers[name];
    if (value !== undefined) kept[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return kept;
}
