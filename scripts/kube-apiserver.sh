#!/usr/bin/env bash
# Provides a real etcd and kube-apiserver for ovnedge's end-to-end tests
# (daemon/e2e, internal/testbed.StartKubeAPI) and prints the apiserver's path.
#
#   scripts/kube-apiserver.sh            build or reuse etcd and the apiserver
#   KUBE_APISERVER_VERSION=v1.34.5 ...   another v1.34.x (must match testbed's default or the
#                                        tests must be given KUBE_APISERVER=path)
#
# etcd is built by scripts/etcd.sh (Debian's is too old for the apiserver's
# streaming lists). No apiserver is packaged for Debian: scripts/kube-build.sh
# builds it from the Go module proxy and caches it by version under
# ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/kapi-<version> (only a fresh machine
# pays the cold builds, etcd ~1 min and the apiserver ~5-7 min on 2 cores,
# ~2 GB RAM; KAPI_GCFLAGS as there).
set -euo pipefail

version=${KUBE_APISERVER_VERSION:-v1.34.4}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || {
  echo "kube-apiserver.sh: KUBE_APISERVER_VERSION=$version is not v1.MINOR.PATCH" >&2
  exit 2
}

"$(dirname "$0")/etcd.sh" >/dev/null
KUBE_VERSION=$version exec "$(dirname "$0")/kube-build.sh" kube-apiserver
