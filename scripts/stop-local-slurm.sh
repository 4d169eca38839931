#!/usr/bin/env bash
# rlsweep's copy of the shared stop-local-slurm.sh. Usage: sudo bash scripts/stop-local-slurm.sh [--purge]
#
# Stop what start-local-slurm.sh started, by the PIDs in the daemons' pid files
# (never by process name). --purge also wipes slurm state (job ids restart at 1),
# the accounting database and the logs.
set -uo pipefail
[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 1; }

stop_pidfile() {   # stop_pidfile NAME PIDFILE
  local name="$1" pf="$2" pid
  [ -s "$pf" ] || return 0
  pid="$(cat "$pf")"
  # only signal the pid if it really is that daemon (stale pid files after a restart)
  if kill -0 "$pid" 2>/dev/null && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
    echo "[stop-local-slurm] stopping $name (pid $pid)" >&2
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "[stop-local-slurm] $name (pid $pid) ignored SIGTERM for 30s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
  fi
  rm -f "$pf"
}

# order: compute daemon, controller, accounting daemon, database, auth
stop_pidfile slurmd    /run/slurmd.pid
stop_pidfile slurmctld /run/slurmctld.pid
stop_pidfile slurmdbd  /run/slurmdbd.pid
if [ "${1:-}" = "--purge" ]; then
  echo "[stop-local-slurm] purging slurm state, accounting database and logs" >&2
  # drop the DB through the server (deleting the files would corrupt InnoDB's dictionary)
  if [ -s /run/mysqld/mysqld.pid ] && kill -0 "$(cat /run/mysqld/mysqld.pid)" 2>/dev/null; then
    mariadb -e 'DROP DATABASE IF EXISTS slurm_acct_db' || true
  fi
  rm -rf /var/spool/slurmctld/* /var/spool/slurmd/* /var/log/slurm/*
fi
stop_pidfile mariadbd  /run/mysqld/mysqld.pid
stop_pidfile munged    /run/munge/munged.pid
exit 0
