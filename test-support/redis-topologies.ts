// Redis as operators run it when one server is not enough, started by tests from Debian's redis-server on loopback
// ports of their own, in a temp dir of their own: a Sentinel set (one master, one replica, three sentinels) that a
// test can fail over, and a three-master Redis Cluster. Each stops every process it started.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, portAnswers, waitFor } from './private-services';

const run = promisify(execFile);

async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args]);
  return stdout.trim();
}

interface Server {
  port: number;
  child: ChildProcess;
}

async function startServer(dir: string, port: number, args: string[]): Promise<Server> {
  const child = spawn('redis-server', [...args, '--port', String(port), '--bind', '127.0.0.1', '--dir', dir], { stdio: 'ignore' });
  await waitFor(`redis-server on ${port}`, () => portAnswers(port));
  return { port, child };
}

async function kill(server: Server): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGKILL');
  await exited;
}

/** Kills every server started and removes their dir. */
async function stopAll(servers: Server[], dir: string): Promise<void> {
  await Promise.all(servers.map(kill));
  rmSync(dir, { recursive: true, force: true });
}

const DATA_OPTIONS = ['--save', '', '--appendonly', 'no'];

export interface SentinelSet {
  masterName: string;
  /** REDIS_SENTINELS for the service. */
  sentinels: string;
  masterPort(): Promise<number>;
  /** SENTINEL FAILOVER, waits until the sentinels name the replica as master, then kills the old master. */
  failOver(): Promise<{ oldMaster: number; newMaster: number }>;
  close(): Promise<void>;
}

export async function startSentinelSet(masterName = 'svc-main'): Promise<SentinelSet> {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-sentinel-'));
  const servers: Server[] = [];
  try {
    const master = await startServer(dir, await freePort(), [...DATA_OPTIONS, '--dbfilename', 'master.rdb']);
    servers.push(master);
    const replicaPort = await freePort();
    servers.push(
      await startServer(dir, replicaPort, [...DATA_OPTIONS, '--dbfilename', 'replica.rdb', '--replicaof', '127.0.0.1', String(master.port)]),
    );
    const sentinelPorts: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      const port = await freePort();
      const config = path.join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        config,
        [
          `sentinel monitor ${masterName} 127.0.0.1 ${master.port} 2`,
          `sentinel down-after-milliseconds ${masterName} 1000`,
          `sentinel failover-timeout ${masterName} 5000`,
          `sentinel parallel-syncs ${masterName} 1`,
          '',
        ].join('\n'),
      );
      servers.push(await startServer(dir, port, [config, '--sentinel']));
      sentinelPorts.push(port);
    }
    const masterPort = async () => Number((await redisCli(sentinelPorts[0], 'SENTINEL', 'get-master-addr-by-name', masterName)).split('\n')[1]);
    // A failover needs the sentinels to know the replica and each other.
    await waitFor(
      'the sentinels to see the replica and each other',
      async () => {
        for (const port of sentinelPorts) {
          const info = await redisCli(port, 'SENTINEL', 'master', masterName);
          const fields = info.split('\n');
          const value = (name: string) => Number(fields[fields.indexOf(name) + 1]);
          if (value('num-slaves') < 1 || value('num-other-sentinels') < 2) return false;
        }
        return (await redisCli(replicaPort, 'INFO', 'replication')).includes('master_link_status:up');
      },
      30_000,
    );
    return {
      masterName,
      sentinels: sentinelPorts.map((port) => `127.0.0.1:${port}`).join(','),
      masterPort,
      async failOver() {
        const oldMaster = await masterPort();
        await redisCli(sentinelPorts[0], 'SENTINEL', 'FAILOVER', masterName);
        await waitFor('the sentinels to promote the replica', async () => (await masterPort()) !== oldMaster, 30_000);
        await kill(servers.find((s) => s.port === oldMaster)!);
        return { oldMaster, newMaster: await masterPort() };
      },
      close: () => stopAll(servers, dir),
    };
  } catch (err) {
    await stopAll(servers, dir);
    throw err;
  }
}

export interface RedisCluster {
  /** REDIS_CLUSTER_NODES for the service. */
  nodes: string;
  close(): Promise<void>;
}

/** Three masters, no replicas, slots spread by `redis-cli --cluster create`. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-cluster-'));
  const servers: Server[] = [];
  try {
    for (let i = 0; i < 3; i += 1) {
      const port = await freePort();
      servers.push(
        await startServer(dir, port, [
          ...DATA_OPTIONS,
          '--cluster-enabled', 'yes',
          '--cluster-config-file', `nodes-${port}.conf`,
          '--cluster-node-timeout', '2000',
          '--dbfilename', `dump-${port}.rdb`,
        ]),
      );
    }
    const nodes = servers.map((s) => `127.0.0.1:${s.port}`);
    await run('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes']);
    await waitFor(
      'the cluster to be ok on every node',
      async () => {
        for (const s of servers) if (!(await redisCli(s.port, 'CLUSTER', 'INFO')).includes('cluster_state:ok')) return false;
        return true;
      },
      30_000,
    );
    return {
      nodes: nodes.join(','),
      close: () => stopAll(servers, dir),
    };
  } catch (err) {
    await stopAll(servers, dir);
    throw err;
  }
}
