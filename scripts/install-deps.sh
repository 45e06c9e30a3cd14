#!/usr/bin/env bash
# Installs what ovnedge's tests, benchmarks and demo need on a fresh
# Debian 12 machine: real Open vSwitch, OVN and host networking tools (see
# docs: no kernel module is needed, everything runs on OVS's userspace
# datapath; frr is the BGP peer of the e2e tests, which run their own
# zebra, bfdd and bgpd inside the router namespace, whatever the system's
# frr service does; containerd, runc and the CNI plugins are the container
# runtime of testbed's real Kubernetes nodes, which run their own containerd
# per node). With --lint it also installs staticcheck. Idempotent:
# when everything is there it only checks, in well under a second.
set -euo pipefail

packages=(openvswitch-switch ovn-central ovn-host frr iptables nftables iproute2
  tcpdump iputils-arping iputils-ping netcat-openbsd ethtool ndisc6
  containerd runc containernetworking-plugins)
staticcheck_version=v0.8.2 # staticcheck 2026.2.2: the Go proxy serves it under its module version only

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]})); then
  if ((EUID != 0)); then
    echo "ovnedge: missing Debian packages: ${missing[*]}" >&2
    echo "ovnedge: install them as root: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "ovnedge: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts the packaged containerd; the tests run their own.
  if [[ " ${missing[*]} " == *" containerd "* ]] && command -v systemctl >/dev/null &&
    systemctl is-active --quiet containerd 2>/dev/null; then
    systemctl disable --now containerd >/dev/null 2>&1 || true
  fi
fi

if [[ ${1:-} == --lint ]]; then
  gobin=$(go env GOPATH)/bin
  if [[ ! -x $gobin/staticcheck ]] && ! command -v staticcheck >/dev/null; then
    echo "ovnedge: installing staticcheck $staticcheck_version"
    go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
  fi
fi
