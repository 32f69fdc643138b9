// Runs one of the bench's scripts as a child process to its end, for the tests that keep the benches from rotting:
// its exit code and everything it printed. A script still running after `limitMs` gets SIGTERM (the benches then
// stop their API and worker processes and drop their database, which SIGKILL would leave behind), and SIGKILL
// `killGraceMs` later.
import { spawn } from 'node:child_process';
import path from 'node:path';

export const BENCH_ROOT = path.resolve(__dirname, '../..');

export interface ScriptRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runBenchScript(script: string, env: Record<string, string>, limitMs: number, killGraceMs: number): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(BENCH_ROOT, script)], {
      cwd: BENCH_ROOT,
      env: { ...process.env, BENCH_SKIP_BUILD: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), killGraceMs).unref();
    }, limitMs);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
