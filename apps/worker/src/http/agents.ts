// Keep-alive connections that keep the URL-safety guarantee. Every attempt resolves and checks the receiver's
// address first (as before); the connection pool is then chosen by (hostname, port, checked address), and that
// pool's agent can only connect to that address (its lookup is pinned). A socket is therefore only ever reused for
// the address that has just passed the check again: when a name starts resolving elsewhere, the next attempt gets
// another pool, and a private address never gets a pool at all because it never passes.
import { Agent } from 'node:https';
import type { SecureContext } from 'node:tls';
import { pinnedLookup } from './pinned-lookup';

export interface ConnectionPoolOptions {
  /** One TLS context for every connection (CA material parsed once per process). */
  secureContext?: SecureContext;
  /** Concurrent sockets per receiver address. */
  maxSocketsPerAddress: number;
  /** Idle sockets are closed after this long. */
  idleTimeoutMs: number;
  /** Pools kept at once; the least recently used is closed beyond this. */
  maxPools: number;
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
    const agent = new Agent({
      keepAlive: true,
      maxSockets: this.options.maxSocketsPerAddress,
      maxFreeSockets: this.options.maxSocketsPerAddress,
      timeout: this.options.idleTimeoutMs,
      scheduling: 'lifo',
      // Agent options win over request options when the socket is created: the pinned lookup cannot be bypassed.
      lookup: pinnedLookup(target.address, target.family),
      ...(this.options.secureContext && { secureContext: this.options.secureContext }),
    });
    this.agents.set(key, agent);
    this.evictBeyondLimit();
    return agent;
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
