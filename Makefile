# widetp — the two commands of the README are `make e2e` (the main job: ginkgo ./e2e) and `make test`.
# Both install what they need first (scripts/deps.sh: libzmq, pkg-config, python3-zmq) and use the
# Ginkgo version pinned as a tool in go.mod, so a fresh machine with Go and Docker needs nothing else.

GO      ?= go
GINKGO  := $(GO) tool ginkgo
# Every package but the e2e suite: unit tests need no Docker.
UNIT    := $(shell $(GO) list ./... 2>/dev/null | grep -v '/e2e$$')
E2E_FLAGS ?=
# The widetp binary the tests start on their hosts (`widetp node`, `widetp store`): built once
# here instead of once per test package.
WIDETP_BIN := $(abspath bin/widetp)
export WIDETP_BIN

.PHONY: all deps build test e2e bench images lint clean

all: build

deps:
	@./scripts/deps.sh

build: deps
	$(GO) build -o bin/ ./cmd/...

test: build
	$(GO) vet ./...
	$(GO) test -race -count=1 $(UNIT)

# The main job. Runs on Docker when an engine is reachable and on the local runtime otherwise.
e2e: build
	$(GINKGO) -r --keep-going --junit-report=junit.xml --output-dir=artifacts $(E2E_FLAGS) ./e2e

# Time to verdict against the runtime's floor, 2 to 64 nodes, both runtimes (docs/bench: the
# README's table and plot), then the packages' Go benchmarks.
BENCH_FLAGS ?= --reps 3
bench: build
	bin/widetp bench --scenario scenarios/vllm48061-external-lb-wide-tp-buggy.yaml --out docs/bench $(BENCH_FLAGS)
	$(GO) test -run='^$$' -bench=. -benchmem $(UNIT)

images: build
	bin/widetp images

lint: deps
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Removes everything labelled io.widetp.run (containers, networks, images) and the build output.
clean:
	-$(GO) run ./cmd/widetp clean
	rm -rf bin artifacts
