#!/bin/sh
# Starts the API (dist/main.js) with the V8 options it is sized for. Every real start goes through here:
# scripts/start.sh, Dockerfile.api, the bench and the tests that run the API as a process. Arguments are extra node
# options, placed after these (the bench passes BENCH_NODE_OPTIONS; a later --heap-growing-percent wins).
#
# --heap-growing-percent=50: after a full collection V8 lets the old generation grow to 1.5 x what survived, instead
# of up to 4 x. Publishing with 32 clients at 1,500-3,000 events/s promotes the requests in flight quickly: with the
# default the API's RSS peaked at 305-308 MiB, with 75 at 199-216 MiB, with 50 at 186-205 MiB, CPU per event within
# the machine's noise. Unlike --max-old-space-size it sets no ceiling. docs/performance.md, "Performance".
set -eu
exec node --heap-growing-percent=50 "$@" "$(dirname "$0")/dist/main.js"
