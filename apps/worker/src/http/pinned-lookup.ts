// A DNS lookup that always answers with one address: the one that passed the URL-safety check. The request still
// names the URL's hostname, so Host and TLS SNI/certificate checks use the hostname, but the socket can only go
// where the check said it may (no second resolution, no DNS rebinding between check and connect).
import type { LookupAddress, LookupOptions } from 'node:dns';

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

// It answers on a later turn of the event loop, as a real lookup does: answered at once, the socket's 'lookup' event
// came before got listened for it, and got's connect timeout never started (a host that never answered the connect
// held its attempt for the whole request timeout).
export function pinnedLookup(address: string, family: 4 | 6) {
  return (_hostname: string, options: LookupOptions | LookupCallback, callback?: LookupCallback): void => {
    const cb = typeof options === 'function' ? options : callback!;
    const all = typeof options === 'object' && options !== null && options.all === true;
    setImmediate(() => {
      if (all) cb(null, [{ address, family }]);
      else cb(null, address, family);
    });
  };
}
