// Structured JSON logs. Every line written while a request is being handled carries its request id, taken from an
// AsyncLocalStorage context, so call sites never pass it around. The worker does not use that context: once an
// AsyncLocalStorage has run, Node 20 calls a hook for every promise the process creates (a few per cent of a
// delivery's CPU); its jobs log through a child logger carrying the job id instead (withJobLogger).
import { AsyncLocalStorage } from 'node:async_hooks';
import winston from 'winston';

export interface LogContext {
  requestId?: string;
  jobId?: string;
}

const logContext = new AsyncLocalStorage<LogContext>();

export function runWithLogContext<T>(context: LogContext, fn: () => T): T {
  return logContext.run(context, fn);
}

/** `deps` with a logger whose every line carries `job_id` (a shallow copy: everything else is shared). */
export function withJobLogger<T extends { logger: Logger }>(deps: T, jobId: string | undefined): T {
  return { ...deps, logger: deps.logger.child({ job_id: jobId }) };
}

const addContext = winston.format((info) => {
  const ctx = logContext.getStore();
  if (ctx?.requestId) info.request_id = ctx.requestId;
  if (ctx?.jobId) info.job_id = ctx.jobId;
  return info;
});

export type Logger = winston.Logger;

export function createLogger(options: { level?: string; service: string; silent?: boolean }): Logger {
  return winston.createLogger({
    level: options.level ?? 'info',
    silent: options.silent ?? false,
    defaultMeta: { service: options.service },
    format: winston.format.combine(addContext(), winston.format.timestamp(), winston.format.errors({ stack: true }), winston.format.json()),
    transports: [new winston.transports.Console()],
  });
}
