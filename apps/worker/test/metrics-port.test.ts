// Several workers on one host: each serves its metrics on a port of its own (METRICS_PORT) or none (0). A worker
// whose METRICS_PORT is taken stops at start with a message naming the setting, having finished nothing half-way.
import { createServer, type Server } from 'node:net';
import { freePort } from '../../../test-support/private-services';
import { buildWorker, spawnWorker, type ChildWorker } from './support/child-worker';
import { createWorld, type World } from './support/world';

let w: World;
let taken: Server;
let port: number;
const children: ChildWorker[] = [];

beforeAll(async () => {
  buildWorker();
  w = await createWorld({ worker: false });
  port = await freePort();
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(port, '0.0.0.0', resolve));
}, 120_000);

afterAll(async () => {
  for (const child of children) if (child.process.exitCode === null) child.process.kill('SIGKILL');
  taken?.close();
  await w?.close();
});

it('stops a worker whose METRICS_PORT is taken, naming the setting', async () => {
  const child = spawnWorker(w, { METRICS_PORT: String(port) });
  children.push(child);
  const { code } = await child.exited;
  expect(code).toBe(1);
  const error = child.logs().find((l) => l.level === 'error');
  expect(error?.message).toBe(
    `METRICS_PORT=${port} is already in use on 0.0.0.0 (another worker on this host?): give each worker its own METRICS_PORT, ` +
      'or set METRICS_PORT=0 for a worker that serves no metrics',
  );
}, 60_000);

it('runs two workers side by side, each on its own METRICS_PORT', async () => {
  const ports = [await freePort(), await freePort()];
  const pair = ports.map((p) => spawnWorker(w, { METRICS_PORT: String(p) }));
  children.push(...pair);
  for (const [i, child] of pair.entries()) expect((await child.waitForLog('Worker started')).metrics_port).toBe(ports[i]);
  for (const p of ports) expect((await fetch(`http://127.0.0.1:${p}/metrics`)).status).toBe(200);
  for (const child of pair) child.process.kill('SIGTERM');
  for (const child of pair) expect((await child.exited).code).toBe(0);
}, 60_000);
