#!/usr/bin/env bash
# `npm test`: the whole suite in one jest run, from a fresh clone if need be.
#   1. pnpm install --frozen-lockfile, prisma generate;
#   2. PostgreSQL (TEST_DATABASE_ADMIN_URL) and Redis (REDIS_URL) reachable, started locally if they are ours to start;
#   3. type check: tsc -b apps/api apps/worker, then tsc -p tsconfig.test.json for the test files (a failure is
#      reported and makes the exit status non-zero, but the tests still run);
#   4. jest through the root "jest" script (its globalSetup creates a fresh database per run), --ci when CI=true,
#      --forceExit unless JEST_FORCE_EXIT=0; arguments pass through to jest:
#        npm test -- packages/scopes        npm test -- -t 'wildcard' --runInBand
#   5. last line: "N passed, N failed". Exit status: jest's, or 1 when only the type check failed.
#
# Environment: TEST_DATABASE_ADMIN_URL (postgresql://postgres@127.0.0.1:5432/postgres), REDIS_URL
# (redis://127.0.0.1:6379), KEEP_TEST_DB=1 keeps the run's database, CI=true, JEST_FORCE_EXIT=0. The .env file is NOT read:
# tests do not depend on a developer's local settings.
set -uo pipefail
LOG_TAG="test"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT" || exit 1

export TEST_DATABASE_ADMIN_URL="${TEST_DATABASE_ADMIN_URL:-$DEFAULT_TEST_DATABASE_ADMIN_URL}"
export REDIS_URL="${REDIS_URL:-$DEFAULT_REDIS_URL}"

RESULTS="$(mktemp "${TMPDIR:-/tmp}/jest-results.XXXXXX.json")"
trap 'rm -f "$RESULTS"' EXIT

# Anything that stops the run before jest still ends with the summary line.
fail_early() {
  printf '[test] error: %s\n' "$*" >&2
  echo "0 passed, 1 failed"
  exit 1
}

# The helpers exit on failure; run them in subshells so that the summary line is still printed.
(install_deps) || fail_early "installing dependencies failed"
(prisma_generate) || fail_early "prisma generate failed"
(ensure_postgres "$TEST_DATABASE_ADMIN_URL") || fail_early "PostgreSQL is not available"
(ensure_redis "$REDIS_URL") || fail_early "Redis is not available"

typecheck_status=0
build || typecheck_status=$?
if ((typecheck_status == 0)); then
  typecheck_tests || typecheck_status=$?
fi
if ((typecheck_status != 0)); then
  log "type check FAILED (tsc exit $typecheck_status); running the tests anyway"
fi

# --forceExit: a test that leaves a handle open (a Redis connection, a timer) must not hang the run (or CI)
# after the results are in; jest still prints its open-handle warning. JEST_FORCE_EXIT=0 turns it off.
jest_args=(--json "--outputFile=$RESULTS")
[[ "${CI:-}" == true || "${CI:-}" == 1 ]] && jest_args+=(--ci)
[[ "${JEST_FORCE_EXIT:-1}" != 0 ]] && jest_args+=(--forceExit)
# Through the root "jest" script, which runs node with the flags jest needs (--experimental-vm-modules).
log "npm run jest -- ${jest_args[*]} $*"
rm -f "$RESULTS"
npm run --silent jest -- "${jest_args[@]}" "$@"
jest_status=$?

# numFailedTests misses suites that failed before any test ran (a syntax error, a failing import): those count too.
# shellcheck disable=SC2016 # JavaScript, not shell
summary="$(node -e '
  const fs = require("node:fs");
  let r;
  try { r = JSON.parse(fs.readFileSync(process.argv[1], "utf8")); } catch { process.exit(1); }
  const failed = (r.numFailedTests || 0) + (r.numRuntimeErrorTestSuites || 0);
  console.log(`${r.numPassedTests || 0} passed, ${failed} failed`);
' "$RESULTS" 2>/dev/null)" || summary="0 passed, 1 failed"

status=$jest_status
if ((status == 0 && typecheck_status != 0)); then
  status=1
fi
if ((typecheck_status != 0)); then
  log "type check failed: see the tsc errors above"
fi
echo "$summary"
exit "$status"
