// A real HTTP CONNECT proxy for the egress-proxy tests: Debian's tinyproxy on a loopback port of its own, with
// Basic credentials, logging every connection to a file in a temp dir of its own.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, portAnswers, waitFor } from '../../../../test-support/private-services';

export interface Tinyproxy {
  port: number;
  /** WEBHOOK_EGRESS_PROXY: http://user:password@127.0.0.1:port */
  url: string;
  /** The targets of the CONNECT requests it received, in order (`address:port`). */
  connectTargets(): string[];
  log(): string;
  close(): Promise<void>;
}

export const PROXY_USER = 'svc-egress';
export const PROXY_PASSWORD = 'egress-pass-0123';

/** The source address of the proxy's outgoing connections (tinyproxy's `Bind`): receivers see this one. */
export const PROXY_SOURCE_ADDRESS = '127.0.0.2';

export async function startTinyproxy(): Promise<Tinyproxy> {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-tinyproxy-'));
  // tinyproxy drops to `nobody` when started as root: its log file must stay writable for it.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const logFile = path.join(dir, 'tinyproxy.log');
  const configFile = path.join(dir, 'tinyproxy.conf');
  writeFileSync(logFile, '');
  chmodSync(logFile, 0o666);
  writeFileSync(
    configFile,
    [
      `Port ${port}`,
      'Listen 127.0.0.1',
      `Bind ${PROXY_SOURCE_ADDRESS}`,
      'Timeout 30',
      `LogFile "${logFile}"`,
      'LogLevel Connect',
      'MaxClients 100',
      'Allow 127.0.0.1',
      `BasicAuth ${PROXY_USER} ${PROXY_PASSWORD}`,
      ...(process.getuid?.() === 0 ? ['User nobody', 'Group nogroup'] : []),
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn('tinyproxy', ['-d', '-c', configFile], { stdio: 'ignore' });
  await waitFor('tinyproxy', () => portAnswers(port));
  const log = () => readFileSync(logFile, 'utf8');
  return {
    port,
    url: `http://${PROXY_USER}:${PROXY_PASSWORD}@127.0.0.1:${port}`,
    log,
    connectTargets: () => [...log().matchAll(/Request \(file descriptor \d+\): CONNECT (\S+) HTTP/g)].map((m) => m[1]),
    async close() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
