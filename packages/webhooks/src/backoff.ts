// The backoff schedule lives in @svc/domain's retry policy; re-exported here for existing importers.
export {
  MAX_ATTEMPTS,
  DEFAULT_BACKOFF,
  nominalRetryDelayMs,
  retryDelayMs,
  shouldRetry,
  type BackoffOptions,
} from '@svc/domain';
