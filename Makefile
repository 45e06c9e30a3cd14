# ovnedge: `make demo` and `make test` set up and run everything on a fresh
# Debian machine (Debian packages are installed as root when missing).
GO ?= go
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $(shell $(GO) env GOPATH)/bin/staticcheck)
BENCH ?= .
BENCHTIME ?= 1s
# FLAVOR=kube-ovn: make demo shows Kube-OVN's LoadBalancer Services.
FLAVOR ?=

.PHONY: help deps e2e-deps real-node-deps mod-deps test-deps test e2e demo demo-nb bench bench-scale bench-faults lint update-golden embed image deploy docs

help:
	@echo "make demo           ovnedge on a 3-node OVN cluster with a real kube-apiserver: requests to VIPs, egress source, failover gap"
	@echo "make demo FLAVOR=kube-ovn   the same, Kube-OVN-shaped: the lb-svc Deployment and requests through its pod"
	@echo "make demo-nb        ovnedge sync on examples/demo/*.yaml in a one-bridge OVN/OVS sandbox: NB rows, flows, traces"
	@echo "make test           install dependencies, run every test with -race (real OVS/OVN, etcd + kube-apiserver)"
	@echo "make e2e            only the end-to-end tests (daemon against a real kube-apiserver, egress packets)"
	@echo "make bench          run the benchmarks (BENCH=regexp BENCHTIME=1s)"
	@echo "make bench-faults   the fault campaign: FAULTS random faults (300) on the cluster, violations and loss per kind (FAULTS_SEED repeats a run)"
	@echo "make bench-scale    the leader at up to 150k pods / 2k nodes / 10k Services / 1k EgressIPs (SCALE_MAX, SCALE_ROUNDS): report in bench-report/"
	@echo "make lint           gofmt, go vet, staticcheck"
	@echo "make embed          examples/embed (a separate module on the public API): vet, test, GOOS=darwin build; pure packages for darwin"
	@echo "make image          the ovnedge OCI image without docker (crane): build/image/oci, tagged with \`ovnedge version\`"
	@echo "make deploy         rewrite deploy/*.yaml and deploy/crds from the Helm chart deploy/helm/ovnedge"
	@echo "make docs           rewrite docs/flags.md, the flag and config-file key reference, from the flag definitions"
	@echo "make update-golden  rewrite testdata golden files (review the diff!)"

deps:
	@scripts/install-deps.sh

# etcd and kube-apiserver built once from the Go module proxy and cached
# outside the repository (~8 min on a fresh 2-core machine, then 0 s);
# MetalLB's controller and speaker likewise (scripts/metallb.sh).
e2e-deps: deps
	@scripts/kube-apiserver.sh >/dev/null
	@scripts/metallb.sh >/dev/null

# Tests, benchmarks and demos run with no way off the machine: in a fresh
# network namespace with only lo up (scripts/no-way-out.sh), where a dial
# of an address no test created fails at once (internal/testbed's
# TestNoWayOut proves it). Everything that needs the network is fetched
# before, outside it: Debian packages, etcd and kube-apiserver, MetalLB,
# the pinned tools (helm, kubeconform, crane) and every module.
NOWAYOUT = scripts/no-way-out.sh

# testbed's real Kubernetes nodes (StartKubeCluster, AddNode): containerd,
# runc and the CNI plugins from Debian; kubelet, kube-proxy,
# kube-controller-manager and kube-scheduler built with kube-apiserver by one
# go build (scripts/kube-build.sh) and cached: ~15-25 min on a fresh 2-core
# machine (24 min for the four when another build shared the CPUs), then
# 0 s; the local sandbox image (scripts/pause-image.sh); helm.
real-node-deps: deps
	@scripts/etcd.sh >/dev/null
	@scripts/kube-build.sh kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy >/dev/null
	@scripts/pause-image.sh >/dev/null
	@scripts/tool.sh helm >/dev/null

mod-deps:
	$(GO) mod download
	cd examples/embed && $(GO) mod download

test-deps: real-node-deps e2e-deps mod-deps
	@for t in helm kubeconform crane; do scripts/tool.sh $$t >/dev/null; done

test: test-deps
	$(NOWAYOUT) $(GO) test -race -count=1 -timeout 30m ./...
	@# bgp's graceful restart test is built without -race only: GoBGP v4.8.0
	@# races inside itself there (bgp/gracefulrestart_test.go).
	$(NOWAYOUT) $(GO) test -count=1 -run '^TestGracefulRestart$$' ./bgp

e2e: test-deps
	$(NOWAYOUT) $(GO) test -race -count=1 -v ./daemon/e2e ./egress/e2e ./internal/e2e/...

demo: test-deps
	$(NOWAYOUT) $(GO) run ./internal/demo $(if $(FLAVOR),-flavor=$(FLAVOR))

demo-nb: deps mod-deps
	$(NOWAYOUT) $(GO) run ./examples/demo -manifests examples/demo

bench: test-deps
	$(NOWAYOUT) $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -benchmem ./...

# The leader against a real apiserver and NB at growing cluster sizes up to
# SCALE_MAX pods (internal/scale, BenchmarkScale): SCALE_ROUNDS events of
# each kind per size (100: a p99 that is not the maximum), a report (tables, plots, CPU profiles) written to
# SCALE_REPORT. Not part of make test; make bench runs it at 1,000 pods
# without a report.
SCALE_MAX ?= 150000
SCALE_ROUNDS ?= 100
SCALE_REPORT ?= $(CURDIR)/bench-report/scale-$(shell date +%Y%m%d-%H%M%S)
bench-scale: test-deps
	SCALE_MAX_PODS=$(SCALE_MAX) SCALE_REPORT=$(SCALE_REPORT) $(NOWAYOUT) $(GO) test -run '^$$' -bench '^BenchmarkScale$$' \
		-benchtime $(SCALE_ROUNDS)x -timeout 4h -v ./internal/scale

# The fault campaign (internal/e2e BenchmarkFaults): FAULTS random faults
# (chassis or ovnedge killed, uplink down, partitions, ovn-controller
# paused, leader killed) under an egress stream and ARP sampling every
# 10 ms; any two owners, wrong source or loss beyond aim is a violation.
FAULTS ?= 300
bench-faults: test-deps
	OVNEDGE_FAULTS=$(FAULTS) OVNEDGE_FAULTS_SEED=$(FAULTS_SEED) $(NOWAYOUT) $(GO) test -run '^$$' -bench '^BenchmarkFaults$$' \
		-benchtime 1x -timeout 4h -v ./internal/e2e

lint:
	@scripts/install-deps.sh --lint
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

update-golden:
	FLOWTEST_UPDATE=1 $(GO) test ./ovsflow/... -run Golden
	git diff --stat -- testdata

# The pure packages build for any GOOS (host I/O is behind linux build
# tags), and examples/embed, a separate module using only the public API,
# is vetted, tested and cross-built. The desired state (desired, egress,
# lbsvc) links no packet socket, netlink, nftables or iptables code on
# Linux either (egress/hostspec holds hostnet's types, lbsvc/agent the
# lb-svc agent's configuration); no package outside internal/ imports one
# inside it.
PORTABLE = ./event ./bgp/metallb ./desired ./egress ./egress/egresssvc ./egress/hostspec ./egress/api/... ./egress/reach ./lbsvc ./lbsvc/ipam \
	./lbsvc/kubeovn ./lbsvc/agent ./ovsflow ./ovsflow/brex ./ovsflow/openflow ./ovsflow/flowtest ./ovsdbnb ./ovsdbnb/nbdb \
	./ovsdbnb/sbwait ./arp ./kubewatch ./manifests ./gcahead ./ovnknode
embed:
	GOOS=darwin $(GO) build $(PORTABLE)
	@# the pure computation links no host I/O on Linux either
	@heavy=$$(GOOS=linux $(GO) list -deps ./desired ./egress ./lbsvc | grep -E 'netlink|nftables|iptables|mdlayher/(packet|arp|ndp)|ovnedge/arp$$' || true); \
	if [ -n "$$heavy" ]; then echo "desired, egress or lbsvc links host I/O on linux:"; echo "$$heavy"; exit 1; fi
	@inner=$$($(GO) list -f '{{.ImportPath}}: {{join .Imports " "}}' $$($(GO) list ./... | grep -v /internal/) | grep -E ' github.com/ovnedge/ovnedge/internal/' || true); \
	if [ -n "$$inner" ]; then echo "public packages import internal/:"; echo "$$inner"; exit 1; fi
	cd examples/embed && $(GO) vet ./... && $(STATICCHECK) ./... && $(GO) test -race -count=1 ./... && GOOS=darwin $(GO) build ./...

# The OCI image: one static binary on an empty base, built with crane
# v0.22.1 (installed by scripts/tool.sh into ~/.cache/ovnedge/bin) and no
# docker; deploy's TestImage checks it in make test.
image:
	@scripts/image.sh

# deploy/*.yaml and deploy/crds are the chart's default rendering (helm
# v3.22.0 via scripts/tool.sh); deploy's tests check they are, lint the
# chart and validate it with kubeconform v0.8.0 in make test.
deploy:
	UPDATE_DEPLOY=1 $(GO) test -count=1 -run '^TestDeployIsChart$$' ./deploy
	git diff --stat -- deploy

# docs/flags.md is generated from the flag definitions (daemon's options
# and aliases, its commands' own flags and lbsvc-agent's); daemon's
# TestFlagReference checks it is current.
docs:
	UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestFlagReference$$' ./daemon/cmd/flagref
	git diff --stat -- docs
