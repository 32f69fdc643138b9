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
# --max-semi-space-size=8 (MiB; V8's default grows to 16): with the growing percent at 50, drains at c=64 peaked at
# 172 and 180 MiB instead of 183 and 200 MiB at the same CPU per delivery (0.59-0.63 ms), c=100 at 187 MiB (issue 36;
# with V8's default growing factor a young generation this small had raised the c=100 peak, see docs/performance.md).
exec node --heap-growing-percent=50 --max-semi-space-size=8 "$@" "$(dirname "$0")/dist/main.js"
