# shellcheck shell=bash
# Shared helpers for scripts/start.sh, scripts/test.sh and .ci/run. Source it, don't run it:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Functions:
#   pnpm ARGS...            the pnpm on PATH, else `npx pnpm@<version from package.json "packageManager">`
#   load_env_file [FILE]    exports KEY=VALUE lines of FILE (default: .env at the root) that are not already set
#   ensure_postgres URL     PostgreSQL server of URL reachable, starting a local one if it is ours to start
#   ensure_redis URL        the same for Redis
#   ensure_database URL     creates the database named in URL if it does not exist
#   install_deps            pnpm install --frozen-lockfile (plain install only when there is no lockfile)
#   prisma_generate         prisma generate (needs DATABASE_URL: a default is supplied)
#   build                   tsc -b apps/api apps/worker, then the dashboard (type check + vite build to apps/web/dist)
#   typecheck_tests         tsc -p tsconfig.test.json (the test files; no emit)
#   prepare_workspace       install_deps + prisma_generate + build
#
# Local services are started only when the URL's host is this machine and its port is the default one
# (5432, 6379): first the Debian-installed server, else `docker compose up -d <svc>` when a Docker engine answers.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT

# shellcheck disable=SC2034 # used by the scripts that source this file
DEFAULT_DATABASE_URL='postgresql://postgres@127.0.0.1:5432/security_service'
DEFAULT_REDIS_URL='redis://127.0.0.1:6379'
# shellcheck disable=SC2034
DEFAULT_TEST_DATABASE_ADMIN_URL='postgresql://postgres@127.0.0.1:5432/postgres'
SERVICE_WAIT_SECONDS="${SERVICE_WAIT_SECONDS:-30}"

log() { printf '[%s] %s\n' "${LOG_TAG:-scripts}" "$*" >&2; }
die() {
  printf '[%s] error: %s\n' "${LOG_TAG:-scripts}" "$*" >&2
  exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# --- pnpm ------------------------------------------------------------------------------------------------

pnpm_version() {
  # "packageManager": "pnpm@10.34.8" in the root package.json; the fallback matches it.
  local v
  v="$(sed -n 's/.*"packageManager"[[:space:]]*:[[:space:]]*"pnpm@\([^"+]*\).*/\1/p' "$ROOT/package.json" | head -n1)"
  printf '%s\n' "${v:-10.34.8}"
}

pnpm() {
  local bin
  bin="$(type -P pnpm || true)"
  if [[ -n "$bin" ]]; then
    "$bin" "$@"
  else
    npx --yes --loglevel=error "pnpm@$(pnpm_version)" "$@"
  fi
}

# --- environment -----------------------------------------------------------------------------------------

# Exports each KEY=VALUE of a dotenv file unless KEY is already set in the environment (the environment wins).
# Understands comments, blank lines, `export KEY=...`, and single or double quotes around the whole value.
load_env_file() {
  local file="${1:-$ROOT/.env}" line key value
  [[ -f "$file" ]] || return 0
  while IFS= read -r line || [[ -n "$line" ]]; do
    line="${line%$'\r'}"
    [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line#export }"
    [[ "$line" == *=* ]] || continue
    key="${line%%=*}"
    key="${key%"${key##*[![:space:]]}"}"
    value="${line#*=}"
    value="${value#"${value%%[![:space:]]*}"}"
    if [[ "$value" =~ ^\"([^\"]*)\"([[:space:]]+#.*)?[[:space:]]*$ ||
      "$value" =~ ^\'([^\']*)\'([[:space:]]+#.*)?[[:space:]]*$ ]]; then
      value="${BASH_REMATCH[1]}"
    else
      value="${value%%[[:space:]]#*}"              # inline comment after an unquoted value
      value="${value%"${value##*[![:space:]]}"}"
    fi
    [[ "$key" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
    if [[ -z "${!key+x}" ]]; then
      export "$key=$value"
    fi
  done <"$file"
  log "loaded settings from ${file#"$ROOT"/} (variables already in the environment take precedence)"
}

# --- URLs ------------------------------------------------------------------------------------------------

# url_part URL FIELD: FIELD is one of hostname, port, database, protocol. Empty port prints the scheme's default.
url_part() {
  # shellcheck disable=SC2016
  node -e '
    const [raw, field] = process.argv.slice(1);
    let u;
    try { u = new URL(raw); } catch { process.exit(2); }
    const proto = u.protocol.replace(/:$/, "");
    const defaults = { postgres: "5432", postgresql: "5432", redis: "6379", rediss: "6379" };
    const host = decodeURIComponent(u.hostname).replace(/^\[|\]$/g, "") || u.searchParams.get("host") || "";
    const out = {
      hostname: host,
      port: u.port || defaults[proto] || "",
      database: decodeURIComponent(u.pathname.replace(/^\//, "")),
      protocol: proto,
    }[field];
    process.stdout.write(String(out ?? ""));
  ' "$1" "$2"
}

# Prints a URL with its password replaced by ***, for messages.
redact_url() {
  printf '%s' "$1" | sed -E 's#(://[^:/@]*:)[^@/]*@#\1***@#'
}

is_local_host() {
  case "$1" in
    "" | localhost | localhost.localdomain | 127.* | ::1 | 0.0.0.0 | /*) return 0 ;; # /* = Unix socket directory
    *) return 1 ;;
  esac
}

# TCP (and for Redis, PING) check in node, for machines without pg_isready or redis-cli.
# Prints "ok", "auth" (Redis answered but wants credentials) or the connection error.
node_probe() {
  node -e '
    const net = require("node:net");
    const [kind, host, port] = process.argv.slice(1);
    const sock = net.connect({ host: host || "127.0.0.1", port: Number(port) });
    const done = (msg, code) => { sock.destroy(); console.log(msg); process.exit(code); };
    sock.setTimeout(3000, () => done("timed out", 1));
    sock.on("error", (e) => done(e.code || e.message, 1));
    sock.on("connect", () => {
      if (kind !== "redis") return done("ok", 0);
      sock.write("PING\r\n");
    });
    sock.on("data", (d) => {
      const s = d.toString();
      if (s.startsWith("+PONG")) done("ok", 0);
      else if (/NOAUTH|WRONGPASS|NOPERM/.test(s)) done("auth", 3);
      else done(s.trim(), 1);
    });
  ' "$@"
}

# --- PostgreSQL ------------------------------------------------------------------------------------------

# Returns 0 when the server of URL accepts connections. The database itself need not exist.
postgres_reachable() {
  local url="$1" host port
  host="$(url_part "$url" hostname)" || return 1
  port="$(url_part "$url" port)"
  if have pg_isready; then
    # Host and port only: pg_isready rejects URL parameters it does not know (Prisma's ?schema=...).
    pg_isready -q -t 3 ${host:+-h "$host"} -p "$port" >/dev/null 2>&1
  else
    [[ -z "$host" || "$host" == /* ]] && host=127.0.0.1
    node_probe postgres "$host" "$port" >/dev/null
  fi
}

start_local_postgres() {
  local version
  if have pg_ctlcluster && [[ -d /etc/postgresql ]] && [[ -n "$(ls -A /etc/postgresql 2>/dev/null)" ]]; then
    version="$(find /etc/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort -V | tail -n1)"
    if [[ -d "/etc/postgresql/$version/main" ]]; then
      log "starting the local PostgreSQL $version cluster: pg_ctlcluster --skip-systemctl-redirect $version main start"
      if pg_ctlcluster --skip-systemctl-redirect "$version" main start; then
        return 0
      fi
      log "pg_ctlcluster could not start it"
    fi
  fi
  if docker_available; then
    log "starting PostgreSQL with: docker compose up -d postgres"
    compose up -d postgres && return 0
  fi
  return 1
}

ensure_postgres() {
  local url="${1:-$DEFAULT_DATABASE_URL}" host port shown
  shown="$(redact_url "$url")"
  host="$(url_part "$url" hostname)" || die "not a valid PostgreSQL URL: $shown"
  port="$(url_part "$url" port)"
  if postgres_reachable "$url"; then
    return 0
  fi
  log "PostgreSQL at $shown does not answer"
  if ! is_local_host "$host"; then
    die "PostgreSQL at $shown is unreachable and is not on this machine, so nothing was started. Start it, or set DATABASE_URL (tests: TEST_DATABASE_ADMIN_URL) to a server that runs."
  fi
  if [[ "$port" != 5432 ]]; then
    die "PostgreSQL at $shown is unreachable; only a local server on the default port 5432 is started automatically. Start the server on port $port, or point the URL at a running one."
  fi
  start_local_postgres ||
    die "PostgreSQL at $shown is unreachable and could not be started: install PostgreSQL (apt-get install postgresql) or run a Docker engine (docker compose up -d postgres), or set DATABASE_URL / TEST_DATABASE_ADMIN_URL to a running server."
  wait_for "PostgreSQL at $shown" postgres_reachable "$url" ||
    die "PostgreSQL at $shown still does not answer after ${SERVICE_WAIT_SECONDS}s: check its log (/var/log/postgresql/ or docker compose logs postgres)."
  log "PostgreSQL at $shown is up"
}

# Creates the database of URL when missing, connecting to the same server's "postgres" database.
ensure_database() {
  local url="${1:-$DATABASE_URL}"
  # shellcheck disable=SC2016 # JavaScript, not shell
  (cd "$ROOT" && node -e '
    const { Client } = require("pg");
    const target = new URL(process.argv[1]);
    const name = decodeURIComponent(target.pathname.replace(/^\//, ""));
    const redacted = process.argv[1].replace(/(:\/\/[^:\/@]*:)[^@\/]*@/, "$1***@");
    if (!name) { console.error(`[scripts] error: no database name in ${redacted}`); process.exit(1); }
    (async () => {
      let lastError;
      for (const adminDb of ["postgres", "template1"]) {
        const admin = new URL(target.href);
        admin.pathname = "/" + adminDb;
        const client = new Client({ connectionString: admin.href });
        try {
          await client.connect();
        } catch (e) { lastError = e; continue; }
        try {
          const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
          if (rowCount === 0) {
            await client.query(`CREATE DATABASE "${name.replace(/"/g, "\"\"")}"`);
            console.error(`[scripts] created database ${name}`);
          }
          return;
        } finally { await client.end(); }
      }
      throw lastError;
    })().catch((e) => {
      console.error(`[scripts] error: could not check or create the database of ${redacted}: ${e.message}`);
      process.exit(1);
    });
  ' "$url") || exit 1
}

# --- Redis -----------------------------------------------------------------------------------------------

# Prints ok | auth | <error>; returns 0 only for ok.
redis_status() {
  local url="$1" out host port
  if have redis-cli; then
    out="$(timeout 5 redis-cli --no-auth-warning -u "$url" ping 2>&1 || true)"
    case "$out" in
      PONG) echo ok; return 0 ;;
      *NOAUTH* | *WRONGPASS* | *NOPERM* | *"invalid password"* | *"invalid username-password"*) echo auth; return 3 ;;
      *) echo "${out:-no answer}"; return 1 ;;
    esac
  else
    host="$(url_part "$url" hostname)" || { echo "invalid URL"; return 1; }
    port="$(url_part "$url" port)"
    node_probe redis "$host" "$port"
  fi
}

redis_reachable() { redis_status "$1" >/dev/null; }

start_local_redis() {
  local args
  if have redis-server; then
    args=(--daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no)
    [[ -d /var/lib/redis && -w /var/lib/redis ]] && args+=(--dir /var/lib/redis)
    [[ -d /var/log/redis && -w /var/log/redis ]] && args+=(--logfile /var/log/redis/ci.log)
    log "starting the local Redis: redis-server ${args[*]}"
    redis-server "${args[@]}" && return 0
    log "redis-server could not start"
  fi
  if docker_available; then
    log "starting Redis with: docker compose up -d redis"
    compose up -d redis && return 0
  fi
  return 1
}

ensure_redis() {
  local url="${1:-$DEFAULT_REDIS_URL}" host port shown status
  shown="$(redact_url "$url")"
  host="$(url_part "$url" hostname)" || die "not a valid Redis URL: $shown"
  port="$(url_part "$url" port)"
  status="$(redis_status "$url")" && return 0
  if [[ "$status" == auth ]]; then
    die "Redis at $shown answers but refuses the credentials: put the right user and password in REDIS_URL."
  fi
  log "Redis at $shown does not answer ($status)"
  if ! is_local_host "$host"; then
    die "Redis at $shown is unreachable and is not on this machine, so nothing was started. Start it, or set REDIS_URL to a server that runs."
  fi
  if [[ "$port" != 6379 ]]; then
    die "Redis at $shown is unreachable; only a local server on the default port 6379 is started automatically. Start redis-server --port $port, or set REDIS_URL to a running server."
  fi
  start_local_redis ||
    die "Redis at $shown is unreachable and could not be started: install Redis (apt-get install redis-server) or run a Docker engine (docker compose up -d redis), or set REDIS_URL to a running server."
  wait_for "Redis at $shown" redis_reachable "$url" ||
    die "Redis at $shown still does not answer after ${SERVICE_WAIT_SECONDS}s."
  log "Redis at $shown is up"
}

# --- misc ------------------------------------------------------------------------------------------------

# A Docker engine that answers, and Compose: the v2 plugin (`docker compose`) or v1 (`docker-compose`).
docker_available() {
  have docker && docker info >/dev/null 2>&1 && compose version >/dev/null 2>&1
}

compose() {
  if docker compose version >/dev/null 2>&1; then
    (cd "$ROOT" && docker compose "$@")
  elif have docker-compose; then
    (cd "$ROOT" && docker-compose "$@")
  else
    return 1
  fi
}

# wait_for DESCRIPTION COMMAND ARGS...: retries COMMAND once a second for up to SERVICE_WAIT_SECONDS.
wait_for() {
  local what="$1" deadline
  shift
  deadline=$((SECONDS + SERVICE_WAIT_SECONDS))
  log "waiting up to ${SERVICE_WAIT_SECONDS}s for $what"
  until "$@"; do
    ((SECONDS >= deadline)) && return 1
    sleep 1
  done
}

# --- workspace -------------------------------------------------------------------------------------------

install_deps() {
  (
    cd "$ROOT" || exit 1
    if [[ -f pnpm-lock.yaml ]]; then
      log "pnpm install --frozen-lockfile"
      pnpm install --frozen-lockfile --config.confirm-modules-purge=false
    else
      log "no pnpm-lock.yaml: plain pnpm install"
      pnpm install --config.confirm-modules-purge=false
    fi
  ) || die "pnpm install failed (a lockfile out of date with a package.json? run pnpm install and commit pnpm-lock.yaml)"
}

prisma_generate() {
  log "prisma generate"
  (cd "$ROOT" && DATABASE_URL="${DATABASE_URL:-$DEFAULT_DATABASE_URL}" ./node_modules/.bin/prisma generate) ||
    die "prisma generate failed"
}

# Returns tsc's status instead of exiting, so that the test script can go on to run the tests.
build() {
  log "tsc -b apps/api apps/worker"
  (cd "$ROOT" && ./node_modules/.bin/tsc -b apps/api apps/worker) || return
  build_web
}

# The dashboard: type check, then vite build into apps/web/dist (served by the API).
build_web() {
  [[ -f "$ROOT/apps/web/package.json" ]] || return 0
  log "dashboard: tsc -p apps/web, vite build"
  (cd "$ROOT/apps/web" && "$ROOT/node_modules/.bin/tsc" -p tsconfig.json && ./node_modules/.bin/vite build --logLevel warn)
}

# Type-checks the test files as well (tsconfig.test.json: noEmit). Needs build's declarations first.
typecheck_tests() {
  [[ -f "$ROOT/tsconfig.test.json" ]] || return 0
  log "tsc -p tsconfig.test.json (test files, no emit)"
  (cd "$ROOT" && ./node_modules/.bin/tsc -p tsconfig.test.json)
}

prepare_workspace() {
  install_deps
  prisma_generate
  build || die "the build (tsc -b apps/api apps/worker, then the dashboard) failed"
}
