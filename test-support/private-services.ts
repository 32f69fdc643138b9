// A Redis server and a PostgreSQL cluster of a test's own, on ports of their own, that the test stops, pauses and
// starts again to play an outage. Nothing here touches the machine's shared services.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function waitFor(what: string, ready: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(`${what} did not start within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export interface PrivateRedis {
  url: string;
  /**
   * Kills the server. Its data is gone (it keeps nothing on disk, like the machine's own Redis), unless started with
   * `appendOnly`: then it reloads its append-only file when started again, as a production Redis with AOF does.
   */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Freezes the process (SIGSTOP): connections stay open but nothing answers. */
  pause(): void;
  resume(): void;
  /** Kills the server and removes its files. */
  close(): Promise<void>;
}

export async function startPrivateRedis({ appendOnly = false } = {}): Promise<PrivateRedis> {
  const port = await freePort();
  // Every write is on disk before it is acknowledged (appendfsync always): a kill loses nothing the service was told.
  const dir = appendOnly ? mkdtempSync(path.join(tmpdir(), 'svc-redis-aof-')) : undefined;
  const persistence = dir ? ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir] : ['--appendonly', 'no'];
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence], {
      stdio: 'ignore',
    });
    await waitFor('redis-server', () => portAnswers(port));
  };
  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    running.kill('SIGCONT');
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    start,
    stop,
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    close: async () => {
      await stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivatePostgres {
  /** URL of the `postgres` database, for CREATE DATABASE. */
  adminUrl: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops the cluster for good and removes its files. */
  destroy(): Promise<void>;
}

function postgresBinDir(): string {
  if (process.env.PG_BINDIR) return process.env.PG_BINDIR;
  try {
    return execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
  } catch {
    const root = '/usr/lib/postgresql';
    const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
    if (versions.length === 0) throw new Error('PostgreSQL server binaries not found: set PG_BINDIR');
    return path.join(root, versions[0], 'bin');
  }
}

/** PostgreSQL refuses to run as root: as root, run its tools as the `postgres` system user. */
function asClusterOwner(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

function run(command: string, args: string[]): void {
  const [cmd, argv] = asClusterOwner(command, args);
  execFileSync(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-pg-'));
  chmodSync(dir, 0o700);
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const data = path.join(dir, 'data');
  run(path.join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off`;
  const start = async () => {
    run(path.join(bin, 'pg_ctl'), ['-D', data, '-o', options, '-l', path.join(dir, 'log'), '-w', 'start']);
    await waitFor('postgres', () => portAnswers(port));
  };
  const stop = async () => {
    run(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
  };
  await start();
  return {
    adminUrl: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    async destroy() {
      try {
        await stop();
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
