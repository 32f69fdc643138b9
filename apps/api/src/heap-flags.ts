// Imported first by main.ts. After a full collection V8 lets the old generation grow to 1.5 x what survived,
// instead of up to 4 x (the worker's launcher, apps/worker/run.sh, passes such an option on its command line; the
// API is started as plain `node apps/api/dist/main.js` by scripts/start.sh and the bench, so it sets it here,
// before the app allocates). Publishing with 32 clients at 1,500-3,000 events/s promotes the requests in flight
// quickly: with the default the API's RSS peaked at 305-308 MiB, with 75 at 199-216 MiB, with 50 at 186-199 MiB
// (CPU per event within this machine's noise of each other). Unlike --max-old-space-size it sets no ceiling.
// docs/performance.md, "Performance".
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--heap-growing-percent=50');
