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

export interface Failover {
  oldMaster: number;
  newMaster: number;
  /** When (Date.now()) the sentinel that ran the failover first named the new master. */
  promotedAt: number;
}

export interface SentinelSet {
  masterName: string;
  /** REDIS_SENTINELS for the service. */
  sentinels: string;
  masterPort(): Promise<number>;
  /**
   * SENTINEL FAILOVER (on the `via`-th sentinel), waits until every sentinel names the replica as master, then kills
   * the old master, or with `keepOldMaster` makes it a replica of the new one (as Sentinel itself would, a little
   * later), so that the set can fail over again once it is in sync (`replicaInSync`).
   */
  failOver(options?: { keepOldMaster?: boolean; via?: number }): Promise<Failover>;
  /** Resolves when the replica has a live link to the master (a forced failover needs a good replica). */
  replicaInSync(): Promise<void>;
  /** SIGSTOP / SIGCONT of the i-th sentinel of `sentinels`: it keeps accepting connections but answers nothing. */
  pauseSentinel(i: number): void;
  resumeSentinel(i: number): void;
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
    const dataPorts = [master.port, replicaPort];
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
    const masterOf = async (sentinelPort: number) =>
      Number((await redisCli(sentinelPort, 'SENTINEL', 'get-master-addr-by-name', masterName)).split('\n')[1]);
    const masterPort = () => masterOf(sentinelPorts[0]);
    const sentinelServer = (i: number) => servers.find((s) => s.port === sentinelPorts[i])!;
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
    const replicaInSync = async () => {
      const current = await masterPort();
      const replica = dataPorts.find((p) => p !== current)!;
      await waitFor(
        `the replica on ${replica} to sync with ${current}`,
        async () => {
          const info = await redisCli(replica, 'INFO', 'replication');
          return info.includes(`master_port:${current}`) && info.includes('master_link_status:up');
        },
        30_000,
      );
    };
    return {
      masterName,
      sentinels: sentinelPorts.map((port) => `127.0.0.1:${port}`).join(','),
      masterPort,
      replicaInSync,
      async failOver({ keepOldMaster = false, via = 0 } = {}) {
        const sentinelPort = sentinelPorts[via];
        const oldMaster = await masterOf(sentinelPort);
        const failoverInProgress = async () => {
          const fields = (await redisCli(sentinelPort, 'SENTINEL', 'master', masterName)).split('\n');
          return fields[fields.indexOf('flags') + 1].includes('failover_in_progress');
        };
        // Right after a failover the sentinels may still be settling (INPROG, NOGOODSLAVE): ask again. A failover the
        // sentinel accepted can still abort (-failover-abort-no-good-slave, -failover-abort-slave-timeout on a busy
        // machine): it is then asked again, within one deadline.
        const deadline = Date.now() + 60_000;
        const requestFailover = () =>
          waitFor('a sentinel to accept SENTINEL FAILOVER', async () => {
            const answer = await redisCli(sentinelPort, 'SENTINEL', 'FAILOVER', masterName);
            if (answer !== 'OK') await new Promise((r) => setTimeout(r, 200));
            return answer === 'OK';
          }, Math.max(1_000, deadline - Date.now()));
        await requestFailover();
        while ((await masterOf(sentinelPort)) === oldMaster) {
          if (Date.now() > deadline) {
            // What the sentinel thinks of its replicas says why it would not promote one.
            const replicas = await redisCli(sentinelPort, 'SENTINEL', 'replicas', masterName);
            throw new Error(`the sentinels did not promote the replica within 60000 ms; the sentinel's replicas:\n${replicas}`);
          }
          if (!(await failoverInProgress()) && (await masterOf(sentinelPort)) === oldMaster) await requestFailover();
          await new Promise((r) => setTimeout(r, 20));
        }
        const promotedAt = Date.now();
        const newMaster = await masterOf(sentinelPort);
        if (keepOldMaster) await redisCli(oldMaster, 'REPLICAOF', '127.0.0.1', String(newMaster));
        else await kill(servers.find((s) => s.port === oldMaster)!);
        await waitFor('every sentinel to name the new master', async () => {
          for (const port of sentinelPorts) if ((await masterOf(port)) !== newMaster) return false;
          return true;
        }, 30_000);
        return { oldMaster, newMaster, promotedAt };
      },
      pauseSentinel: (i) => void sentinelServer(i).child.kill('SIGSTOP'),
      resumeSentinel: (i) => void sentinelServer(i).child.kill('SIGCONT'),
      close: async () => {
        for (let i = 0; i < sentinelPorts.length; i += 1) sentinelServer(i).child.kill('SIGCONT');
        await stopAll(servers, dir);
      },
    };
  } catch (err) {
    await stopAll(servers, dir);
    throw err;
  }
}

export interface RedisCluster {
  /** REDIS_CLUSTER_NODES for the service. */
  nodes: string;
  /**
   * SIGKILLs the master that owns `key`'s slot and waits until the cluster has promoted its replica and is ok again
   * (needs `replicas`).
   */
  killMasterOf(key: string): Promise<{ oldMaster: number; newMaster: number; promotedAt: number }>;
  close(): Promise<void>;
}

interface ClusterNode {
  port: number;
  master: boolean;
  failed: boolean;
  slots: Array<[number, number]>;
}

function clusterNodes(text: string): ClusterNode[] {
  return text.split('\n').filter(Boolean).map((line) => {
    const [, address, flags, , , , , , ...slots] = line.split(' ');
    return {
      port: Number(address.split('@')[0].split(':')[1]),
      master: flags.split(',').includes('master'),
      failed: /fail/.test(flags),
      slots: slots.filter((s) => /^\d/.test(s)).map((s) => {
        const [from, to] = s.split('-').map(Number);
        return [from, to ?? from] as [number, number];
      }),
    };
  });
}

/** Three masters (with `replicas`, one replica each), slots spread by `redis-cli --cluster create`. */
export async function startRedisCluster({ replicas = false } = {}): Promise<RedisCluster> {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-cluster-'));
  const servers: Server[] = [];
  try {
    for (let i = 0; i < (replicas ? 6 : 3); i += 1) {
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
    await run('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', replicas ? '1' : '0', '--cluster-yes']);
    const alive = () => servers.filter((s) => s.child.exitCode === null && s.child.signalCode === null);
    const clusterOk = async () => {
      for (const s of alive()) if (!(await redisCli(s.port, 'CLUSTER', 'INFO')).includes('cluster_state:ok')) return false;
      return true;
    };
    await waitFor('the cluster to be ok on every node', clusterOk, 30_000);
    if (replicas) {
      await waitFor('every replica to sync with its master', async () => {
        for (const node of clusterNodes(await redisCli(servers[0].port, 'CLUSTER', 'NODES'))) {
          if (!node.master && !(await redisCli(node.port, 'INFO', 'replication')).includes('master_link_status:up')) return false;
        }
        return true;
      }, 30_000);
    }
    const ownerOf = async (slot: number, askPort: number) =>
      clusterNodes(await redisCli(askPort, 'CLUSTER', 'NODES')).find(
        (n) => n.master && !n.failed && n.slots.some(([from, to]) => slot >= from && slot <= to),
      )?.port;
    return {
      nodes: nodes.join(','),
      async killMasterOf(key) {
        const slot = Number(await redisCli(servers[0].port, 'CLUSTER', 'KEYSLOT', key));
        const oldMaster = (await ownerOf(slot, servers[0].port))!;
        await kill(servers.find((s) => s.port === oldMaster)!);
        const witness = alive()[0].port;
        const deadline = Date.now() + 30_000;
        let newMaster: number | undefined;
        while ((newMaster = await ownerOf(slot, witness)) === undefined || newMaster === oldMaster) {
          if (Date.now() > deadline) throw new Error(`no replica took over slot ${slot} within 30000 ms`);
          await new Promise((r) => setTimeout(r, 20));
        }
        const promotedAt = Date.now();
        await waitFor('the cluster to be ok again', clusterOk, 30_000);
        return { oldMaster, newMaster, promotedAt };
      },
      close: () => stopAll(servers, dir),
    };
  } catch (err) {
    await stopAll(servers, dir);
    throw err;
  }
}
