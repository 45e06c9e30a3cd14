#!/usr/bin/env bash
# Builds (or reuses) Kubernetes components from the Go module proxy and
# prints their paths, one a line, in the order asked:
#
#   scripts/kube-build.sh kube-apiserver
#   scripts/kube-build.sh kubelet kube-controller-manager kube-scheduler kube-proxy
#   KUBE_VERSION=v1.34.5 ...   another v1.34.x (KUBE_APISERVER_VERSION is also read;
#                              the testbed must be told the same version)
#
# No Kubernetes binary is packaged for Debian, so they are built in a wrapper
# module OUTSIDE this repository: kubernetes' go.mod replaces every staging
# repo with ./staging/..., which `go install pkg@version` refuses; the wrapper
# replaces each one with its published v0.x.y instead. All static
# (CGO_ENABLED=0), cached by version under
# ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/kapi-<version>/<component> (the
# directory kube-apiserver.sh always used): only a fresh machine pays the cold
# builds (2 cores, warm module cache: kubelet ~5 min, controller-manager ~3 min,
# apiserver ~5-7 min, scheduler and kube-proxy ~15 s each once the others are
# built). The components missing are built by ONE go build, which shares the
# packages they have in common. KAPI_GCFLAGS (default "all=-N -l": no
# optimisation, a faster build for a slightly slower start) is passed to go
# build -gcflags; set it empty for optimised binaries.
set -euo pipefail

components=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet)
log() { echo "kube-build.sh: $*" >&2; }
(($#)) || {
  echo "usage: scripts/kube-build.sh COMPONENT... (${components[*]})" >&2
  exit 2
}
for c in "$@"; do
  [[ " ${components[*]} " == *" $c "* ]] || {
    log "unknown component $c (known: ${components[*]})"
    exit 2
  }
done

version=${KUBE_VERSION:-${KUBE_APISERVER_VERSION:-v1.34.4}}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || {
  log "version $version is not v1.MINOR.PATCH"
  exit 2
}
minor=${BASH_REMATCH[1]}
staging_version=v0.${minor}.${BASH_REMATCH[2]}
gcflags=${KAPI_GCFLAGS-all=-N -l}
dir=${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/kapi-$version

missing() {
  local c
  for c in "$@"; do
    [[ -x $dir/$c ]] || echo "$c"
  done
}
print() {
  local c
  for c in "$@"; do echo "$dir/$c"; done
}

todo=$(missing "$@")
if [[ -z $todo ]]; then
  print "$@"
  exit 0
fi

mkdir -p "$dir"
# One build at a time per version: a second caller waits for the first.
exec 9>"$dir/.lock"
flock 9
mapfile -t todo < <(missing "$@")
if ((${#todo[@]} == 0)); then
  print "$@"
  exit 0
fi

start=$SECONDS
log "building ${todo[*]} $version in $dir (cold: several minutes)"
mod=$dir/module
mkdir -p "$mod"
tools=$(
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for c in "${components[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
  printf ')\n'
)
# The wrapper requires every component's packages, so one tidy serves all.
if [[ ! -f $mod/go.mod || ! -f $mod/tools.go || $(cat "$mod/tools.go") != "$tools" ]]; then
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
  cat >"$mod/go.mod" <<EOM
module kapi-build

go 1.24.0

require k8s.io/kubernetes $version

replace (
$replaces
)
EOM
  echo "$tools" >"$mod/tools.go"
  (cd "$mod" && GOFLAGS=-mod=mod go mod tidy >&2)
fi
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
ldflags+=" -X k8s.io/component-base/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
out=$dir/.build
rm -rf "$out"
mkdir -p "$out"
pkgs=()
for c in "${todo[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
(cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags tools -gcflags="$gcflags" -ldflags "$ldflags" \
  -o "$out/" "${pkgs[@]}")
for c in "${todo[@]}"; do mv "$out/$c" "$dir/$c"; done
rm -rf "$out"
log "built ${todo[*]} in $((SECONDS - start)) s"
print "$@"
