#!/bin/sh
# Starts the delivery worker (dist/main.js) with the V8 options it is sized for. Every real start goes through
# here: scripts/start.sh, Dockerfile.worker, the bench and the tests that run the worker as a process.
# Arguments are extra node options, placed after these (the bench passes BENCH_NODE_OPTIONS; a later
# --heap-growing-percent wins).
#
# --heap-growing-percent=50: after a full collection V8 lets the old generation grow to 1.5 x what survived,
# instead of up to 4 x. The worker's live heap is about 30-35 MiB, but the requests in flight at WORKER_CONCURRENCY=100
# are promoted quickly, and the default let the heap reach 130 MiB between full collections (peak RSS 235-245 MiB);
# with 75 the peak at c=64 and c=100 was still 177-197 MiB, with 50 175-182 MiB at the same CPU per delivery.
# Unlike --max-old-space-size it sets no ceiling, so a real need for memory is still met. docs/performance.md, "Performance".
set -eu
exec node --heap-growing-percent=50 "$@" "$(dirname "$0")/dist/main.js"
