#!/usr/bin/env bash
# Provides a real etcd and kube-apiserver for ovnedge's end-to-end tests
# (daemon/e2e, internal/testbed.StartKubeAPI) and prints the apiserver's path.
#
#   scripts/kube-apiserver.sh            install etcd if missing, build or reuse the apiserver
#   KUBE_APISERVER_VERSION=v1.34.5 ...   another v1.34.x (must match testbed's default or the
#                                        tests must be given KUBE_APISERVER=path)
#
# etcd comes from Debian's etcd-server (installed as root when missing). No
# apiserver is packaged for Debian: scripts/kube-build.sh builds it from the Go
# module proxy and caches it by version under
# ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/kapi-<version> (only a fresh machine
# pays the cold build, ~5-7 min on 2 cores, ~2 GB RAM; KAPI_GCFLAGS as there).
set -euo pipefail

version=${KUBE_APISERVER_VERSION:-v1.34.4}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || {
  echo "kube-apiserver.sh: KUBE_APISERVER_VERSION=$version is not v1.MINOR.PATCH" >&2
  exit 2
}
log() { echo "kube-apiserver.sh: $*" >&2; }

if ! command -v etcd >/dev/null; then
  if ((EUID != 0)); then
    log "etcd is missing: install it as root: sudo apt-get install -y etcd-server"
    exit 1
  fi
  log "installing etcd-server"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null
  # Debian starts the packaged service; the tests run their own etcd.
  if command -v systemctl >/dev/null && systemctl is-active --quiet etcd 2>/dev/null; then
    systemctl disable --now etcd >/dev/null 2>&1 || true
  fi
fi

KUBE_VERSION=$version exec "$(dirname "$0")/kube-build.sh" kube-apiserver
