#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Debian's PostgreSQL cluster for the tests, started the way CI starts it.
#
#   scripts/pg.sh start   starts the cluster (installs nothing), makes sure the
#                         role lua_tasks (password login, CREATEDB) and its
#                         database lua_tasks exist, and prints the URL (of
#                         that database) the tests read from LUA_TASKS_PG_URL:
#                           export LUA_TASKS_PG_URL=$(scripts/pg.sh start)
#   scripts/pg.sh url     prints that URL
#   scripts/pg.sh stop    stops the cluster
#
# Needs Debian's `postgresql` package (apt-get install -y postgresql) and root,
# the cluster's owner (postgres), or sudo. PostgreSQL refuses to run as root,
# so the cluster tools and psql run as its owner. The tests create a database
# of their own for each file and drop it after; the database lua_tasks is for
# the examples (examples/fleet.js) and your own tries.
# The role may signal backends (pg_signal_backend): a test's DROP DATABASE
# ... WITH (FORCE) must end an autovacuum worker that entered its database.
# The password is for a loopback test role only (LUA_TASKS_PG_PASSWORD
# changes it); pg_hba.conf's Debian default allows it over TCP from 127.0.0.1.
set -euo pipefail

ROLE=lua_tasks
PASSWORD="${LUA_TASKS_PG_PASSWORD:-lua_tasks}"

die() {
  echo "pg.sh: $*" >&2
  exit 1
}

command -v pg_lsclusters >/dev/null ||
  die "PostgreSQL's cluster tools are missing: install Debian's postgresql package (apt-get install -y postgresql)."

# The cluster: LUA_TASKS_PG_CLUSTER ("15/main"), else the first one Debian made.
if [ -n "${LUA_TASKS_PG_CLUSTER:-}" ]; then
  VERSION="${LUA_TASKS_PG_CLUSTER%%/*}"
  CLUSTER="${LUA_TASKS_PG_CLUSTER#*/}"
else
  read -r VERSION CLUSTER _ < <(pg_lsclusters -h | head -n 1) ||
    die "no PostgreSQL cluster found (pg_lsclusters lists none): create one with pg_createcluster, or reinstall postgresql."
fi
PORT="$(pg_lsclusters -h | awk -v v="$VERSION" -v c="$CLUSTER" '$1 == v && $2 == c { print $3 }')"
[ -n "$PORT" ] || die "no PostgreSQL cluster $VERSION/$CLUSTER (pg_lsclusters lists: $(pg_lsclusters -h | awk '{ print $1 "/" $2 }' | xargs))."
OWNER="$(pg_lsclusters -h | awk -v v="$VERSION" -v c="$CLUSTER" '$1 == v && $2 == c { print $5 }')"

# as_owner <command...>: runs it as the cluster's owner, from a directory it
# can read (psql complains about an unreadable working directory).
as_owner() {
  if [ "$(id -un)" = "$OWNER" ]; then
    (cd /tmp && "$@")
  elif [ "$(id -u)" = 0 ]; then
    (cd /tmp && runuser -u "$OWNER" -- "$@")
  else
    (cd /tmp && sudo -n -u "$OWNER" -- "$@") ||
      die "cannot run as $OWNER: run this script as root, as $OWNER, or with passwordless sudo."
  fi
}

url() {
  echo "postgres://$ROLE:$PASSWORD@127.0.0.1:$PORT/$ROLE"
}

start() {
  if ! pg_lsclusters -h | awk -v v="$VERSION" -v c="$CLUSTER" '$1 == v && $2 == c { exit $4 == "online" ? 0 : 1 }'; then
    echo "pg.sh: starting PostgreSQL $VERSION/$CLUSTER on port $PORT" >&2
    # Its messages ("Removed stale pid file." after a reboot) go to stderr:
    # stdout carries the URL alone.
    if [ "$(id -u)" = 0 ] || [ "$(id -un)" = "$OWNER" ]; then
      pg_ctlcluster "$VERSION" "$CLUSTER" start >&2
    else
      sudo -n pg_ctlcluster "$VERSION" "$CLUSTER" start >&2 ||
        die "cannot start the cluster: run this script as root, as $OWNER, or with passwordless sudo."
    fi
  fi
  local i
  for i in $(seq 1 100); do
    pg_isready -q -h 127.0.0.1 -p "$PORT" && break
    [ "$i" = 100 ] && die "PostgreSQL $VERSION/$CLUSTER did not accept connections on 127.0.0.1:$PORT within 20 s (see /var/log/postgresql/)."
    sleep 0.2
  done
  # The role, made or brought up to date; the SQL goes in on stdin so that no
  # shell quoting touches it.
  as_owner psql -p "$PORT" -X -q -v ON_ERROR_STOP=1 -v role="$ROLE" -v password="$PASSWORD" >/dev/null <<'SQL'
SELECT format('CREATE ROLE %I', :'role') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN CREATEDB PASSWORD %L', :'role', :'password') \gexec
SELECT format('GRANT pg_signal_backend TO %I', :'role') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'role', :'role') WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'role') \gexec
SQL
  url
}

case "${1:-}" in
  start) start ;;
  url) url ;;
  stop)
    if [ "$(id -u)" = 0 ] || [ "$(id -un)" = "$OWNER" ]; then
      pg_ctlcluster "$VERSION" "$CLUSTER" stop
    else
      sudo -n pg_ctlcluster "$VERSION" "$CLUSTER" stop
    fi
    ;;
  *) die "usage: scripts/pg.sh start|url|stop" ;;
esac
