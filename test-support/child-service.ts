// A service of this repo (the API or the worker) in a child process, started as in production by its run.sh (which
// execs node on its dist/main.js), with its output collected and its JSON log lines readable, for tests that stop,
// kill or restart it.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '..');

/** Compiles an app and the packages it uses (incremental; fast when nothing changed). */
export function buildApp(app: 'apps/api' | 'apps/worker'): void {
  execFileSync(path.join(ROOT, 'node_modules/.bin/tsc'), ['-b', app], { cwd: ROOT, stdio: 'pipe' });
}

export interface ChildService {
  process: ChildProcess;
  output(): string;
  /** JSON log lines written so far. */
  logs(): Array<Record<string, unknown>>;
  /** The first log line with this message; throws once the process ended or the time is up without it. */
  waitForLog(message: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `launcher` (a run.sh) with `env` on top of this process's environment. `name` is for error messages. */
export function spawnService(name: string, launcher: string, env: NodeJS.ProcessEnv, defaultWaitMs: number): ChildService {
  const child = spawn('sh', [launcher], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
    async waitForLog(message, timeoutMs = defaultWaitMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = logs().find((l) => l.message === message);
        if (found) return found;
        if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
          throw new Error(`The ${name} never logged "${message}". Output:\n${output}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/** Kills the child outright if it still runs (a test that failed midway). */
export async function killIfRunning(child: ChildService | undefined): Promise<void> {
  if (!child || child.process.exitCode !== null || child.process.signalCode !== null) return;
  child.process.kill('SIGKILL');
  await child.exited;
}
