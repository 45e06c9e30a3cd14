#!/usr/bin/env bash
# The sandbox ("pause") image of testbed's real Kubernetes nodes
# (testbed.StartKubeNode), built without docker or a registry of the
# internet and cached: prints the path of its OCI archive,
# ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/pause-<version>/pause.tar.
#
# The image holds two static Go binaries (CGO_ENABLED=0) on an empty base:
# /pause, the entrypoint, waits for SIGTERM or SIGINT and exits 0;
# /netserver PORT... is the test pods' server: on every TCP connection to
# one of its ports it writes "<hostname> <client address>\n" (a pod's
# hostname is its name) and echoes what it reads, the protocol of
# internal/e2e's Serve and Reply. It is packed as scripts/image.sh packs
# ovnedge's: crane against a registry served on loopback for the build
# only. Its index.json names the manifest by its tag
# (org.opencontainers.image.ref.name, without which `ctr images import`
# imports nothing); import it with
#   ctr -n k8s.io --address SOCK images import --base-name localhost/pause pause.tar
# to get localhost/pause:<version> (testbed.PauseImage). Bump version (here and
# testbed.PauseImage) when the program changes.
set -euo pipefail
cd "$(dirname "$0")/.."

version=2
dir=${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/pause-$version
out=$dir/pause.tar
if [[ -f $out ]]; then
  echo "$out"
  exit 0
fi
crane=$(scripts/tool.sh crane)
log() { echo "pause-image.sh: $*" >&2; }
mkdir -p "$dir"
tmp=$(mktemp -d)
reg_pid=
cleanup() {
  [[ -z $reg_pid ]] || kill "$reg_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/src/pause" "$tmp/src/netserver" "$tmp/rootfs"
cat >"$tmp/src/go.mod" <<'EOM'
module pause

go 1.24
EOM
cat >"$tmp/src/netserver/main.go" <<'EOM'
// netserver serves TCP on every port named in its arguments: it greets
// each connection with "<hostname> <client address>\n" and echoes what it
// reads until the client closes or 30 s pass.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	host, _ := os.Hostname()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: netserver PORT...")
		os.Exit(2)
	}
	for _, port := range os.Args[1:] {
		ln, err := net.Listen("tcp", ":"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go serve(ln, host)
	}
	select {}
}

func serve(ln net.Listener, host string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(c, "%s %s\n", host, c.RemoteAddr())
			_, _ = io.Copy(c, c)
		}()
	}
}
EOM
cat >"$tmp/src/pause/main.go" <<'EOM'
// pause is the sandbox process of a pod: it holds the pod's namespaces
// and exits when the runtime stops the sandbox.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
EOM
for prog in pause netserver; do
  (cd "$tmp/src" && GOFLAGS= CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags=-s -o "$tmp/rootfs/$prog" "./$prog")
done
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$tmp/rootfs" -cf "$tmp/layer.tar" pause netserver

# A registry on loopback for crane mutate, for this build only.
"$crane" registry serve --address 127.0.0.1:0 >"$tmp/registry.log" 2>&1 &
reg_pid=$!
reg=
for _ in $(seq 100); do
  reg=$(grep -oE '127\.0\.0\.1:[0-9]+|port [0-9]+|\[::\]:[0-9]+' "$tmp/registry.log" | head -1 || true)
  [[ -n $reg ]] && break
  sleep 0.1
done
[[ -n $reg ]] || { log "crane registry did not start: $(cat "$tmp/registry.log")"; exit 1; }
name=127.0.0.1:${reg##*[: ]}/pause
"$crane" append --insecure --oci-empty-base -f "$tmp/layer.tar" -t "$name:base" >/dev/null
"$crane" mutate --insecure "$name:base" -t "$name:$version" --entrypoint=/pause \
  --set-platform=linux/amd64 --label=org.opencontainers.image.title=pause >/dev/null
"$crane" pull --insecure --format=oci "$name:$version" "$tmp/oci"
# crane writes no annotations here (no --annotation above): add the tag's.
sed -i "0,/\"mediaType\": \"application\/vnd.oci.image.manifest.v1+json\",/s//&\n         \"annotations\": {\"org.opencontainers.image.ref.name\": \"$version\"},/" "$tmp/oci/index.json"
grep -q '"org.opencontainers.image.ref.name": "'"$version"'"' "$tmp/oci/index.json" || {
  log "no annotations in $tmp/oci/index.json to name the manifest: $(cat "$tmp/oci/index.json")"
  exit 1
}
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$tmp/oci" -cf "$out.tmp" .
mv "$out.tmp" "$out"
log "built $out"
echo "$out"
