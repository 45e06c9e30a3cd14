#!/usr/bin/env bash
# `make image`: the ovnedge OCI image, built without docker or a daemon.
#
# The static binary (CGO_ENABLED=0, linux/amd64, VCS-stamped) is the only
# file, /usr/local/bin/ovnedge, in one layer on an empty base (crane append
# --oci-empty-base); crane mutate, against a registry served on loopback for
# the build only, sets the entrypoint, PATH (the lb-svc Deployments run
# `ovnedge lbsvc-agent` by name), the platform, user 65532 (the leader runs
# as it; the node DaemonSet needs root: NET_ADMIN, NET_RAW and the OVS
# sockets, so the chart sets runAsUser 0 there) and the OCI labels. The tag
# is the version `ovnedge version` prints ('+' becomes '_', as helm does for
# OCI tags).
#
# Output ($IMAGE_OUT, default build/image):
#   oci/          the image as an OCI layout (skopeo copy oci:build/image/oci ...)
#   ovnedge.tar   the same layout as one archive (podman load, skopeo oci-archive:)
#   tag           the tag; ref: repository:tag ($IMAGE_REPO, default ghcr.io/ovnedge/ovnedge)
set -euo pipefail
cd "$(dirname "$0")/.."

out=${IMAGE_OUT:-build/image}
repo=${IMAGE_REPO:-ghcr.io/ovnedge/ovnedge}
crane=$(scripts/tool.sh crane)
log() { echo "image.sh: $*" >&2; }

rm -rf "$out"
mkdir -p "$out/rootfs/usr/local/bin"
bin=$out/rootfs/usr/local/bin/ovnedge
# -tags nomanifests: no manifests mode (client-go's fake clientsets, a
# quarter of the binary) in the pods; internal/e2e's ImageBuildFlags.
build() { CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -buildvcs=true -trimpath -tags nomanifests "$@" -o "$bin" ./daemon/cmd/ovnedge; }
build
read -r _ version revision < <("$bin" version)
if [[ -z ${revision:-} ]] && git rev-parse --git-dir >/dev/null 2>&1; then
  # A git worktree (.git is a file) gets no VCS stamp from the go
  # command: give `ovnedge version` what it would have said.
  revision=$(git rev-parse HEAD)
  when=$(TZ=UTC git show -s --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)
  version=v0.0.0-$when-${revision:0:12}
  [[ -z $(git status --porcelain --untracked-files=no) ]] || version+=+dirty
  build -ldflags "-X 'github.com/ovnedge/ovnedge/daemon.stampedVersion=$version $revision'"
  read -r _ version revision < <("$bin" version)
fi
[[ -n ${revision:-} ]] || { log "ovnedge version printed no VCS revision: build from a git checkout"; exit 1; }
tag=${version//+/_}
created=$(TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ "$revision" 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
log "ovnedge $version ($revision), tag $tag"

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$created" \
  -C "$out/rootfs" -cf "$out/layer.tar" usr

# A registry on loopback for crane mutate, for this build only.
port_file=$out/registry.log
"$crane" registry serve --address 127.0.0.1:0 >"$port_file" 2>&1 &
reg_pid=$!
trap 'kill "$reg_pid" 2>/dev/null || true' EXIT
reg=
for _ in $(seq 100); do
  reg=$(grep -oE '127\.0\.0\.1:[0-9]+|port [0-9]+|\[::\]:[0-9]+' "$port_file" | head -1 || true)
  [[ -n $reg ]] && break
  sleep 0.1
done
[[ -n $reg ]] || { log "crane registry did not start: $(cat "$port_file")"; exit 1; }
reg=127.0.0.1:${reg##*[: ]}
name=$reg/ovnedge
"$crane" append --insecure --oci-empty-base -f "$out/layer.tar" -t "$name:base" >/dev/null
"$crane" mutate --insecure "$name:base" -t "$name:$tag" \
  --entrypoint=/usr/local/bin/ovnedge --cmd=daemon \
  --env=PATH=/usr/local/bin --user=65532:65532 --set-platform=linux/amd64 \
  --label=org.opencontainers.image.title=ovnedge \
  --label="org.opencontainers.image.description=Kubernetes edge traffic (LoadBalancer and ExternalIP VIPs, EgressIPs) on OVN/OVS" \
  --label=org.opencontainers.image.source=https://github.com/ovnedge/ovnedge \
  --label="org.opencontainers.image.version=$version" \
  --label="org.opencontainers.image.revision=$revision" \
  --label="org.opencontainers.image.created=$created" \
  --annotation="org.opencontainers.image.version=$version" \
  --annotation="org.opencontainers.image.revision=$revision" >/dev/null
"$crane" pull --insecure --format=oci "$name:$tag" "$out/oci"
# name the manifest by its tag in the layout (skopeo copy oci:DIR:TAG ...)
sed -i "0,/\"annotations\": {/s//\"annotations\": {\n            \"org.opencontainers.image.ref.name\": \"$tag\",/" "$out/oci/index.json"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$created" -C "$out/oci" -cf "$out/ovnedge.tar" .
echo "$tag" >"$out/tag"
echo "$repo:$tag" >"$out/ref"
rm -rf "$out/rootfs" "$out/layer.tar" "$port_file"
echo "$repo:$tag in $out/oci ($out/ovnedge.tar); helm: --set image.repository=$repo,image.tag=$tag"
