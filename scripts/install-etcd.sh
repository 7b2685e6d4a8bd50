#!/usr/bin/env bash
# Install the etcd server binary that the cluster tests run as throwaway
# members on loopback (crates/cluster/src/etcd_temp.rs; crates/cluster/tests,
# crates/cli/tests/it/cluster.rs). Idempotent: does nothing when `etcd` is on
# PATH (or GLASSBOX_ETCD_BIN names it); otherwise installs Debian's
# `etcd-server` package (apt-get update first, only then).
set -euo pipefail

if [[ -n "${GLASSBOX_ETCD_BIN:-}" && -x "${GLASSBOX_ETCD_BIN}" ]]; then
  echo "etcd present ($GLASSBOX_ETCD_BIN)"
  exit 0
fi
if command -v etcd >/dev/null 2>&1; then
  echo "etcd present ($(command -v etcd), $(etcd --version 2>/dev/null | head -1))"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: etcd not found and apt-get is not available" >&2
  echo "hint: install etcd (3.4 or newer) with your package manager, or set GLASSBOX_ETCD_BIN to the etcd binary" >&2
  exit 69
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi

echo "installing etcd-server ..."
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends etcd-server

if ! command -v etcd >/dev/null 2>&1; then
  echo "error: etcd-server installed but no etcd on PATH" >&2
  exit 69
fi
# The package starts a system etcd where systemd runs; the tests start their
# own on free ports and do not use it.
echo "etcd installed ($(etcd --version 2>/dev/null | head -1))"
