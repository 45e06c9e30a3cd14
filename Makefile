# ovnedge: `make demo` and `make test` set up and run everything on a fresh
# Debian machine (Debian packages are installed as root when missing).
GO ?= go
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $(shell $(GO) env GOPATH)/bin/staticcheck)
BENCH ?= .
BENCHTIME ?= 1s

.PHONY: help deps test demo bench lint update-golden

help:
	@echo "make demo           run ovnedge on examples/demo/*.yaml in a local OVN/OVS sandbox and show the result"
	@echo "make test           install dependencies, run every test with -race (real OVS/OVN)"
	@echo "make bench          run the benchmarks (BENCH=regexp BENCHTIME=1s)"
	@echo "make lint           gofmt, go vet, staticcheck"
	@echo "make update-golden  rewrite testdata golden files (review the diff!)"

deps:
	@scripts/install-deps.sh

test: deps
	$(GO) test -race -count=1 ./...

demo: deps
	$(GO) run ./examples/demo -manifests examples/demo

bench: deps
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -benchmem ./...

lint:
	@scripts/install-deps.sh --lint
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

update-golden:
	$(GO) test ./ovsflow/... -run Golden -update
	git diff --stat -- testdata
