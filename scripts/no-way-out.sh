#!/usr/bin/env bash
# Runs a command in a fresh network namespace that has only `lo` up, so no
# test, benchmark or demo can send a packet off the machine: a dial of any
# address that no test created fails at once with "network is unreachable".
# Everything the tests need works from there: OVS and OVN (userspace
# datapath, unix sockets and 127.0.0.1), etcd and kube-apiserver on
# 127.0.0.1, and the network namespaces and veths the tests create (named
# namespaces are bind mounts under /run/netns, independent of this one).
# The namespace is anonymous (unshare --net): it goes away with the last
# process in it, so there is nothing to remove.
#
# Installing packages, modules and tools needs the network: the Makefile
# does it before, outside (make test-deps). The command sees
# OVNEDGE_NO_WAY_OUT=1, which testbed's TestNoWayOut checks.
#
#   scripts/no-way-out.sh go test ./...
set -euo pipefail
if (($# == 0)); then
  echo "usage: scripts/no-way-out.sh COMMAND [ARG...]" >&2
  exit 2
fi
if ((EUID != 0)); then
  echo "ovnedge: scripts/no-way-out.sh needs root (unshare --net; the tests make namespaces and veths too)" >&2
  exit 1
fi
# GOPROXY=off and GOTOOLCHAIN=local: a module or toolchain missing from the
# cache fails with a message naming it, not with a dial that cannot leave.
exec unshare --net -- env OVNEDGE_NO_WAY_OUT=1 GOPROXY=off GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-}" \
  sh -c 'ip link set lo up && exec "$@"' no-way-out "$@"
