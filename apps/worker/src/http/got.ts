// got 14 is ESM-only. This CommonJS package loads it with a dynamic import, once: that works under plain Node
// (main.ts) and under jest's VM modules (node --experimental-vm-modules), where require('got') does not.
import type { Got } from 'got' with { 'resolution-mode': 'import' };

export type { Got };

let loading: Promise<Got> | undefined;

export function loadGot(): Promise<Got> {
  loading ??= import('got').then((module) => module.got);
  return loading;
}
