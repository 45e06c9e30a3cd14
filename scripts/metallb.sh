#!/usr/bin/env bash
# Builds MetalLB's controller and speaker (go.universe.tf/metallb, pinned
# below) on first use into ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/bin/
# metallb-<version>/{controller,speaker} and prints that directory (later
# runs are offline). The e2e tests run them against their kube-apiserver
# (internal/e2e/metallb.go); the CRDs come from the same module's
# config/crd/bases in the module cache (printed by `scripts/metallb.sh crds`).
#
#   scripts/metallb.sh        -> .../bin/metallb-v0.16.2
#   scripts/metallb.sh crds   -> $GOMODCACHE/go.universe.tf/metallb@v0.16.2/config/crd/bases
#
# `go install go.universe.tf/metallb/{controller,speaker}@v0.16.2` is tried
# first. Where the Go proxy refuses a dependency (the proxy of the
# development machine serves github.com/metallb/frr-k8s v0.0.26 but not
# v0.0.27, which MetalLB v0.16.2 requires), the same MetalLB source is built
# in a scratch module whose frr-k8s is v0.0.26 plus the one type v0.0.27
# added (AsPathPrependPrefixes, Advertise.PrefixesWithAsPathPrepend). Those
# types are used only by the frr-k8s BGP backend (METALLB_BGP_TYPE=frr-k8s),
# never by the native L2 mode the tests run.
set -euo pipefail

version=v0.16.2
frrk8s_fallback=v0.0.26

export GOFLAGS=
export CGO_ENABLED=0

if [[ ${1:-} == crds ]]; then
  dir=$(cd "${TMPDIR:-/tmp}" && go mod download -json "go.universe.tf/metallb@$version" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  echo "$dir/config/crd/bases"
  exit 0
fi

out=${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/bin/metallb-$version
if [[ -x $out/controller && -x $out/speaker ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"

# outside this module, so its go.mod is not consulted or changed
if ! (cd "$tmp" && GOBIN=$tmp/bin go install "go.universe.tf/metallb/controller@$version" "go.universe.tf/metallb/speaker@$version") >&2; then
  echo "metallb.sh: go install @$version failed; building it with frr-k8s $frrk8s_fallback (+ AsPathPrependPrefixes)" >&2
  frr=$(cd "$tmp" && go mod download -json "github.com/metallb/frr-k8s@$frrk8s_fallback" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  cp -r "$frr" "$tmp/frr-k8s"
  chmod -R u+w "$tmp/frr-k8s"
  api=$tmp/frr-k8s/api/v1beta1
  sed -i 's/^\(\s*\)PrefixesWithCommunity \[\]CommunityPrefixes `json:"withCommunity,omitempty"`/&\n\1PrefixesWithAsPathPrepend []AsPathPrependPrefixes `json:"withAsPathPrepend,omitempty"`/' "$api/frrconfiguration_types.go"
  grep -q PrefixesWithAsPathPrepend "$api/frrconfiguration_types.go"
  cat >"$api/zz_aspathprepend.go" <<'EOF'
package v1beta1

// AsPathPrependPrefixes is frr-k8s v0.0.27's type, added for MetalLB
// v0.16.2 (scripts/metallb.sh).
type AsPathPrependPrefixes struct {
	AsPathPrepend uint8    `json:"asPathPrepend,omitempty"`
	Prefixes      []string `json:"prefixes,omitempty"`
}
EOF
  mkdir "$tmp/build"
  cat >"$tmp/build/go.mod" <<EOF
module metallbbuild

go 1.25

require go.universe.tf/metallb $version

replace github.com/metallb/frr-k8s => $tmp/frr-k8s
EOF
  (cd "$tmp/build" && GOFLAGS=-mod=mod GOBIN=$tmp/bin go install go.universe.tf/metallb/controller go.universe.tf/metallb/speaker) >&2
fi
rm -rf "$out.tmp"
mv "$tmp/bin" "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
