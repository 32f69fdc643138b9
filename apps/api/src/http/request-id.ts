import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import { runWithLogContext, type Logger } from '@svc/config';
import { maskShareTokens } from '../auth/share-token';

const INCOMING_ID = /^[A-Za-z0-9._-]{8,100}$/;

/** Gives every request an id (a sane incoming X-Request-Id is kept), echoes it, and logs inside its context. */
export const requestId: RequestHandler = (req, res, next) => {
  const incoming = req.headers['x-request-id'];
  req.requestId = typeof incoming === 'string' && INCOMING_ID.test(incoming) ? incoming : randomUUID();
  res.setHeader('X-Request-Id', req.requestId);
  runWithLogContext({ requestId: req.requestId }, next);
};

/**
 * One line per request: method, route, status, duration. Never bodies, headers or query strings; a report share
 * token in the path (the public share routes) is masked.
 */
export function accessLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      logger.info('request', {
        method: req.method,
        path: maskShareTokens(req.path),
        status: res.statusCode,
        duration_ms: Number((process.hrtime.bigint() - started) / 1_000_000n),
        principal: req.principal?.apiKeyPrefix ?? req.principal?.userId,
      });
    });
    next();
  };
}
