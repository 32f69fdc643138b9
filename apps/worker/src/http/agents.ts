// Keep-alive connections that keep the URL-safety guarantee. Every attempt resolves and checks the receiver's
// address first (as before); the connection pool is then chosen by (hostname, port, checked address), and that
// pool's agent can only connect to that address (its lookup is pinned). A socket is therefore only ever reused for
// the address that has just passed the check again: when a name starts resolving elsewhere, the next attempt gets
// another pool, and a private address never gets a pool at all because it never passes.
// With an egress proxy the pools are the same, keyed the same way; each one's connections are tunnels through the
// proxy to its checked address (proxy-tunnel.ts).
import { Agent, type AgentOptions } from 'node:https';
import type { SecureContext } from 'node:tls';
import { pinnedLookup } from './pinned-lookup';
import { TunnelAgent } from './proxy-tunnel';

export interface EgressProxyOptions {
  url: URL;
  /** Bound on connecting to the proxy and its answer to CONNECT. */
  connectTimeoutMs: number;
}

export interface ConnectionPoolOptions {
  /** One TLS context for every connection (CA material parsed once per process). */
  secureContext?: SecureContext;
  /** Concurrent sockets per receiver address. */
  maxSocketsPerAddress: number;
  /** Idle sockets are closed after this long. */
  idleTimeoutMs: number;
  /** Pools kept at once; the least recently used is closed beyond this. */
  maxPools: number;
  /** Send every connection through this HTTP CONNECT proxy (WEBHOOK_EGRESS_PROXY). */
  proxy?: EgressProxyOptions;
}

export interface PoolTarget {
  hostname: string;
  port: number;
  address: string;
  family: 4 | 6;
}

export class ConnectionPool {
  private readonly agents = new Map<string, Agent>();

  constructor(private readonly options: ConnectionPoolOptions) {}

  agentFor(target: PoolTarget): Agent {
    const key = `${target.hostname}|${target.port}|${target.address}`;
    const existing = this.agents.get(key);
    if (existing) {
      // Map order is insertion order: re-inserting marks the pool as most recently used.
      this.agents.delete(key);
      this.agents.set(key, existing);
      return existing;
    }
    const agent = this.createAgent(target);
    this.agents.set(key, agent);
    this.evictBeyondLimit();
    return agent;
  }

  private createAgent(target: PoolTarget): Agent {
    const options: AgentOptions = {
      keepAlive: true,
      maxSockets: this.options.maxSocketsPerAddress,
      maxFreeSockets: this.options.maxSocketsPerAddress,
      timeout: this.options.idleTimeoutMs,
      scheduling: 'lifo',
      // Agent options win over request options when the socket is created: the pinned lookup cannot be bypassed.
      lookup: pinnedLookup(target.address, target.family),
      // Never Node's default, which NODE_TLS_REJECT_UNAUTHORIZED=0 in the worker's environment would turn off.
      rejectUnauthorized: true,
      ...(this.options.secureContext && { secureContext: this.options.secureContext }),
    };
    const { proxy } = this.options;
    if (!proxy) return new Agent(options);
    return new TunnelAgent(options, proxy.url, { address: target.address, port: target.port }, proxy.connectTimeoutMs);
  }

  get size(): number {
    return this.agents.size;
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  private evictBeyondLimit(): void {
    while (this.agents.size > this.options.maxPools) {
      const [oldestKey, oldest] = this.agents.entries().next().value as [string, Agent];
      this.agents.delete(oldestKey);
      oldest.destroy();
    }
  }
}
