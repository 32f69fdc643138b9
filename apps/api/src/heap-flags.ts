// Imported first by main.ts. After a full collection V8 lets the old generation grow to 1.75 x what survived,
// instead of up to 4 x (the worker's launcher, apps/worker/run.sh, passes the same option on its command line; the
// API is started as plain `node apps/api/dist/main.js` by scripts/start.sh, its Dockerfile and the bench, so it sets
// it here, before the app allocates). Publishing with 32 clients at ~1,900 events/s promotes the requests in flight
// quickly, and the default let the API's RSS peak at 305-308 MiB; with it 209-210 MiB, for ~5 % more CPU per event.
// Unlike --max-old-space-size it sets no ceiling. docs/performance.md, "Performance".
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--heap-growing-percent=75');
