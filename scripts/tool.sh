#!/usr/bin/env bash
# Prints the path of a pinned release tool, installing it with `go install`
# on first use into ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/bin/<name>-<version>
# (later runs are offline). Tools: crane, helm, kubeconform.
#
#   scripts/tool.sh crane        -> .../bin/crane-v0.22.1
set -euo pipefail

case ${1:-} in
crane) pkg=github.com/google/go-containerregistry/cmd/crane version=v0.22.1 ;;
helm) pkg=helm.sh/helm/v3/cmd/helm version=v3.22.0 ;;
kubeconform) pkg=github.com/yannh/kubeconform/cmd/kubeconform version=v0.8.0 ;;
*)
  echo "usage: scripts/tool.sh crane|helm|kubeconform" >&2
  exit 2
  ;;
esac
dir=${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/bin
bin=$dir/$1-$version
if [[ ! -x $bin ]]; then
  mkdir -p "$dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # outside this module, so its go.mod is not consulted or changed
  (cd "$tmp" && GOFLAGS= GOBIN=$tmp CGO_ENABLED=0 go install "$pkg@$version") >&2
  mv "$tmp/$(basename "$pkg")" "$bin"
fi
echo "$bin"
