#!/usr/bin/env bash
# Builds (or reuses) etcd from the Go module proxy and prints its path:
#
#   scripts/etcd.sh                    etcd v3.6.16 (testbed.EtcdVersion)
#   ETCD_VERSION=v3.6.15 ...           another version (the tests must be given
#                                      ETCD=path, or the testbed's default changed)
#
# The testbed's etcd must report watch progress (etcd >= 3.5.13): without it
# kube-apiserver disables its streaming lists (WatchList, on by default since
# Kubernetes 1.34: "the required storage feature RequestWatchProgress is
# disabled") and every informer falls back to one LIST whose whole response
# the client holds at once. Debian 12's etcd is 3.4.23, so it is built here:
# a wrapper module calling go.etcd.io/etcd/server/v3/etcdmain.Main (what
# etcd's own main does), static, cached by version under
# ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/etcd-<version>/etcd (~70 s on 2 cores
# with a cold module cache, then 0 s).
set -euo pipefail

version=${ETCD_VERSION:-v3.6.16}
[[ $version =~ ^v3\.[0-9]+\.[0-9]+$ ]] || {
  echo "etcd.sh: ETCD_VERSION=$version is not v3.MINOR.PATCH" >&2
  exit 2
}
log() { echo "etcd.sh: $*" >&2; }
dir=${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/etcd-$version
if [[ -x $dir/etcd ]]; then
  echo "$dir/etcd"
  exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/.lock" # one build at a time: a second caller waits
flock 9
if [[ -x $dir/etcd ]]; then
  echo "$dir/etcd"
  exit 0
fi
start=$SECONDS
log "building etcd $version in $dir"
mod=$dir/module
mkdir -p "$mod"
cat >"$mod/main.go" <<'EOM'
// Command etcd is etcd's own main: etcdmain.Main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOM
cat >"$mod/go.mod" <<EOM
module etcd-build

go 1.24.0

require go.etcd.io/etcd/server/v3 $version
EOM
(cd "$mod" && GOFLAGS=-mod=mod go mod tidy >&2 &&
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dir/.etcd" .)
mv "$dir/.etcd" "$dir/etcd"
log "built etcd $version in $((SECONDS - start)) s"
echo "$dir/etcd"
