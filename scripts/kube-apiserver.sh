#!/usr/bin/env bash
# Provides a real etcd and kube-apiserver for ovnedge's end-to-end tests
# (daemon/e2e, internal/testbed.StartKubeAPI) and prints the apiserver's path.
#
#   scripts/kube-apiserver.sh            install etcd if missing, build or reuse the apiserver
#   KUBE_APISERVER_VERSION=v1.34.5 ...   another v1.34.x (must match testbed's default or the
#                                        tests must be given KUBE_APISERVER=path)
#
# etcd comes from Debian's etcd-server (installed as root when missing). No
# apiserver is packaged for Debian, so it is built from the Go module proxy in a
# wrapper module OUTSIDE this repository (kubernetes' go.mod replaces every
# staging repo with ./staging/..., which `go install pkg@version` refuses; the
# wrapper replaces each one with its published v0.x.y instead). The binary is
# cached by version under ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/kapi-<version>:
# only a fresh machine pays the cold build (~5-7 min on 2 cores, ~2 GB RAM).
# KAPI_GCFLAGS (default "all=-N -l": no optimisation, a faster build for a ~1 s
# slower start) is passed to go build -gcflags; set it empty for an optimised
# binary.
set -euo pipefail

version=${KUBE_APISERVER_VERSION:-v1.34.4}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || {
  echo "kube-apiserver.sh: KUBE_APISERVER_VERSION=$version is not v1.MINOR.PATCH" >&2
  exit 2
}
minor=${BASH_REMATCH[1]}
staging_version=v0.${minor}.${BASH_REMATCH[2]}
gcflags=${KAPI_GCFLAGS-all=-N -l}
dir=${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/kapi-$version
bin=$dir/kube-apiserver
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

if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$dir"
# One build at a time per version: a second caller waits for the first.
exec 9>"$dir/.lock"
flock 9
if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi

start=$SECONDS
log "building kube-apiserver $version in $dir (cold: several minutes)"
mod=$dir/module
mkdir -p "$mod"
gomod=$(cd "$mod" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
[[ -f $gomod ]] || {
  log "could not download k8s.io/kubernetes@$version's go.mod"
  exit 1
}
replaces=$(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*$#\t\1 => \1 '"$staging_version"'#p' "$gomod")
[[ -n $replaces ]] || {
  log "no staging replace directives found in $gomod"
  exit 1
}
cat >"$mod/go.mod" <<EOF
module kapi-build

go 1.24.0

require k8s.io/kubernetes $version

replace (
$replaces
)
EOF
cat >"$mod/tools.go" <<'EOF'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
EOF
(cd "$mod" && GOFLAGS=-mod=mod go mod tidy >&2)
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
ldflags+=" -X k8s.io/component-base/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
(cd "$mod" && GOFLAGS=-mod=mod go build -trimpath -tags tools -gcflags="$gcflags" -ldflags "$ldflags" \
  -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
mv "$bin.tmp" "$bin"
log "built $bin in $((SECONDS - start)) s"
echo "$bin"
