// The real worker in a child process, started as in production (apps/worker/run.sh, which execs node on
// apps/worker/dist/main.js), for tests that kill or stop it.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { World } from './world';
import { FAST_RETRY_ENV } from './world';

const ROOT = path.resolve(__dirname, '../../../..');
export const WORKER_LAUNCHER = path.join(ROOT, 'apps/worker/run.sh');

/** Compiles the worker and the packages it uses (incremental; fast when nothing changed). */
export function buildWorker(): void {
  execFileSync(path.join(ROOT, 'node_modules/.bin/tsc'), ['-b', 'apps/worker'], { cwd: ROOT, stdio: 'pipe' });
}

export interface ChildWorker {
  process: ChildProcess;
  output(): string;
  /** JSON log lines written so far. */
  logs(): Array<Record<string, unknown>>;
  waitForLog(message: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnWorker(w: World, env: Record<string, string> = {}): ChildWorker {
  const child = spawn('sh', [WORKER_LAUNCHER], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...FAST_RETRY_ENV,
      NODE_ENV: 'test',
      // debug: successful attempts are logged at debug (apps/worker/src/deliver.ts logAttempt).
      LOG_LEVEL: 'debug',
      REDIS_PREFIX: w.h.config.redisPrefix,
      DATABASE_URL: w.h.config.databaseUrl,
      WEBHOOK_EXTRA_CA_FILE: w.tls.caFile,
      // No metrics server: its fixed default port would collide with other test files' workers, or a running service.
      METRICS_PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const logs = () =>
    output
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return {
    process: child,
    output: () => output,
    logs,
    exited,
    async waitForLog(message, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = logs().find((l) => l.message === message);
        if (found) return found;
        if (child.exitCode !== null || Date.now() > deadline) {
          throw new Error(`Child worker never logged "${message}". Output:\n${output}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}
