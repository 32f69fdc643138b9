#!/usr/bin/env bash
# `npm start`: installs and builds the workspace, makes sure PostgreSQL and Redis run, creates the database and
# applies the migrations, then runs the API and the delivery worker in the foreground together.
# Ctrl-C (SIGINT) or SIGTERM stops both; if either exits, the other is stopped and the script exits with its status.
#
# Settings come from the environment, then from a .env file at the root (see .env.example), then defaults:
#   PORT (3000), DATABASE_URL (postgresql://postgres@127.0.0.1:5432/security_service),
#   REDIS_URL (redis://127.0.0.1:6379; or REDIS_SENTINELS / REDIS_CLUSTER_NODES), and everything else the apps read
#   (NODE_ENV, JWT_SECRET, ...).
set -euo pipefail
LOG_TAG="start"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

load_env_file "$ROOT/.env"
export PORT="${PORT:-3000}"
export DATABASE_URL="${DATABASE_URL:-$DEFAULT_DATABASE_URL}"
export REDIS_URL="${REDIS_URL:-$DEFAULT_REDIS_URL}"

prepare_workspace
ensure_postgres "$DATABASE_URL"
ensure_database "$DATABASE_URL"
# A Sentinel set or a Cluster is the operator's to run: only a single REDIS_URL server is checked (and started locally).
if [[ -z "${REDIS_SENTINELS:-}" && -z "${REDIS_CLUSTER_NODES:-}" ]]; then
  ensure_redis "$REDIS_URL"
fi
log "prisma migrate deploy"
./node_modules/.bin/prisma migrate deploy || die "prisma migrate deploy failed for $(redact_url "$DATABASE_URL")"

for entry in apps/api/dist/main.js apps/worker/dist/main.js; do
  [[ -f "$entry" ]] || die "$entry is missing after the build (no src/main.ts in that app?)"
done

# From here on, failures are handled explicitly.
set +e
API_PID=''
WORKER_PID=''
HEALTH_PID=''
STOPPING=''
STOPPED=''

# SIGTERM to both, a grace period, then SIGKILL to what is left. Runs once.
stop_children() {
  local pid deadline
  [[ -n "$STOPPED" ]] && return 0
  STOPPED=1
  if [[ -n "$HEALTH_PID" ]]; then kill "$HEALTH_PID" 2>/dev/null; fi
  for pid in "$API_PID" "$WORKER_PID"; do
    if [[ -n "$pid" ]]; then kill -TERM "$pid" 2>/dev/null; fi
  done
  deadline=$((SECONDS + ${SHUTDOWN_TIMEOUT_SECONDS:-20}))
  for pid in "$API_PID" "$WORKER_PID"; do
    [[ -n "$pid" ]] || continue
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "process $pid did not stop within ${SHUTDOWN_TIMEOUT_SECONDS:-20}s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  return 0
}

# The traps only record the signal; the main loop below does the work (a trap that runs functions while bash
# sits in `wait` trips bash bugs). Background jobs of a non-interactive shell ignore SIGINT, so both signals
# are passed on to the API and the worker as SIGTERM, their graceful-shutdown signal.
trap 'STOPPING=${STOPPING:-INT}' INT
trap 'STOPPING=${STOPPING:-TERM}' TERM
trap 'stop_children' EXIT

# The API through its launcher, which adds the V8 options it is sized for (apps/api/run.sh).
sh apps/api/run.sh &
API_PID=$!
# The worker through its launcher, which adds the V8 options it is sized for (apps/worker/run.sh).
sh apps/worker/run.sh &
WORKER_PID=$!
log "API pid $API_PID, worker pid $WORKER_PID"

# Announce the URL once /healthz answers with a 2xx, or warn after HEALTH_TIMEOUT_SECONDS.
(
  trap - INT TERM EXIT
  deadline=$((SECONDS + ${HEALTH_TIMEOUT_SECONDS:-60}))
  while kill -0 "$API_PID" 2>/dev/null; do
    # shellcheck disable=SC2016 # JavaScript, not shell
    if node -e '
      fetch(`http://127.0.0.1:${process.env.PORT}/healthz`, { signal: AbortSignal.timeout(2000) })
        .then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1));
    ' 2>/dev/null; then
      log "API ready: http://localhost:$PORT (worker running); dashboard: http://localhost:$PORT/"
      exit 0
    fi
    if ((SECONDS >= deadline)); then
      log "warning: http://localhost:$PORT/healthz has not answered after ${HEALTH_TIMEOUT_SECONDS:-60}s"
      exit 0
    fi
    sleep 1
  done
) &
HEALTH_PID=$!

# Wait until the API or the worker exits, or a signal comes.
status=0
exited=''
if ((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))); then
  while [[ -z "$STOPPING" ]]; do
    if wait -n "$API_PID" "$WORKER_PID" 2>/dev/null; then status=0; else status=$?; fi
    [[ -n "$STOPPING" ]] && break
    if ! kill -0 "$API_PID" 2>/dev/null; then exited=API; break; fi
    if ! kill -0 "$WORKER_PID" 2>/dev/null; then exited=worker; break; fi
  done
else # bash < 5.1 has no `wait -n PID...`: poll
  while [[ -z "$STOPPING" ]]; do
    if ! kill -0 "$API_PID" 2>/dev/null; then
      exited=API
      if wait "$API_PID"; then status=0; else status=$?; fi
      break
    fi
    if ! kill -0 "$WORKER_PID" 2>/dev/null; then
      exited=worker
      if wait "$WORKER_PID"; then status=0; else status=$?; fi
      break
    fi
    sleep 1
  done
fi

if [[ -n "$STOPPING" ]]; then
  log "received SIG$STOPPING: stopping the API and the worker"
  stop_children
  # A stop on request: the first non-zero status of the two (not counting death by our SIGTERM), else 0.
  status=0
  for pid in "$API_PID" "$WORKER_PID"; do
    if wait "$pid" 2>/dev/null; then s=0; else s=$?; fi
    # 127: already reaped by wait -n; 143 or 130: killed by our SIGTERM or by the terminal's SIGINT
    # (node restores default signal handling, so on Ctrl-C both processes get SIGINT from the terminal too).
    if [[ "$s" != 0 && "$s" != 127 && "$s" != 143 && "$s" != 130 && "$status" == 0 ]]; then status=$s; fi
  done
  exit "$status"
fi

if [[ "$exited" == API ]]; then other=worker; else other=API; fi
log "the $exited exited (status $status): stopping the $other"
stop_children
# Either one ending by itself is a failure, even with status 0.
((status == 0)) && status=1
exit "$status"
