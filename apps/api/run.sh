#!/bin/sh
# Starts the API (dist/main.js) with the V8 options it is sized for. Every real start goes through here:
# scripts/start.sh, Dockerfile.api, the bench and the tests that run the API as a process. Arguments are extra node
# options, placed after these (the bench passes BENCH_NODE_OPTIONS; a later --heap-growing-percent wins).
#
# --heap-growing-percent=50: after a full collection V8 lets the old generation grow to 1.5 x what survived, instead
# of up to 4 x. Publishing with 32 clients at 1,500-3,000 events/s promotes the requests in flight quickly: with the
# default the API's RSS peaked at 305-308 MiB, with 75 at 199-216 MiB, with 50 at 186-205 MiB, CPU per event within
# the machine's noise. Unlike --max-old-space-size it sets no ceiling.
# --max-semi-space-size=8 (MiB; V8's default grows to 16): a young generation half as large. Publishing with 32
# clients peaked at 183-189 MiB instead of 199-202 MiB, for 10-15 % fewer events a second (three runs against two, on
# a machine running the test suite beside them). docs/performance.md, "Performance".
set -eu
exec node --heap-growing-percent=50 --max-semi-space-size=8 "$@" "$(dirname "$0")/dist/main.js"
