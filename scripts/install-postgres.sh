#!/usr/bin/env bash
# Install the PostgreSQL server binaries (initdb, pg_ctl) that the trace-store
# tests use to start a throwaway server. Idempotent: does nothing when
# /usr/lib/postgresql/*/bin/initdb exists; otherwise installs Debian's
# `postgresql` package (apt-get update first, only then).
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  echo "postgresql present ($(ls -d /usr/lib/postgresql/*/bin | tail -1))"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: PostgreSQL server binaries not found and apt-get is not available" >&2
  echo "hint: install PostgreSQL with your package manager, or set GLASSBOX_PG_BIN to the directory holding initdb and pg_ctl" >&2
  exit 69
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi

echo "installing postgresql ..."
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends postgresql

if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  echo "error: postgresql installed but no /usr/lib/postgresql/*/bin/initdb" >&2
  exit 69
fi
echo "postgresql installed ($(ls -d /usr/lib/postgresql/*/bin | tail -1))"
