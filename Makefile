# widetp — the two commands of the README are `make e2e` (the main job: ginkgo ./e2e) and `make test`.
# Both install what they need first (scripts/deps.sh: libzmq5, gcc, nftables, python3-zmq) and use the
# Ginkgo version pinned as a tool in go.mod, so a fresh machine with Go and Docker needs nothing else.

GO      ?= go
GINKGO  := $(GO) tool ginkgo
# Every package but the e2e suite: unit tests need no Docker.
UNIT    := $(shell $(GO) list ./... 2>/dev/null | grep -v '/e2e$$')
# The model and its readers (vLLM's rules, the scenario loader, the checks, the report and its
# page, and the CLI over them, whose one goroutine waits for a signal) compute in one goroutine:
# their tests are CPU-bound sweeps over deployments, which the race detector slows about
# sevenfold (vllm/conform 3 s -> 29 s, cmd/widetp 4 s -> 29 s, report/htmlreport 2 s -> 15 s)
# for nothing it could find. They run without it. Every other package (the node program, the
# store, the harness, the runtimes, the sockets, the probe's pool of Python processes) runs
# under -race.
SEQUENTIAL := $(filter %/widetp/vllm %/widetp/vllm/conform %/widetp/vllm/internal/genflags \
	%/widetp/vllm/probe/probetest %/widetp/scenarios %/widetp/check %/widetp/report %/widetp/report/htmlreport \
	%/widetp/cmd/widetp,$(UNIT))
CONCURRENT := $(filter-out $(SEQUENTIAL),$(UNIT))
E2E_FLAGS ?=
# Ginkgo processes of `make e2e`. Most of a spec's time is a wait (a rendezvous bound that a
# failing scenario waits out, a process start, a container start), so three processes on two
# cores finish the suite in a little over half the time of one (README, "Quick start": the paragraph
# on E2E_PROCS, with the figures).
# E2E_PROCS=1 runs it serially.
E2E_PROCS ?= 3
# The widetp binary the tests start on their hosts (`widetp node`, `widetp store`): built once
# here instead of once per test package.
WIDETP_BIN := $(abspath bin/widetp)
export WIDETP_BIN

# The nightly job (README, "Nightly CI"): VLLM is a vLLM checkout (a git clone of
# vllm-project/vllm, or a site-packages directory), NIGHTLY_PROFILE the model profile of its
# behaviour (main for vLLM main; main-455edc0 for the snapshot the tests use).
VLLM ?=
NIGHTLY_PROFILE ?= main
NIGHTLY_GENERATE ?= 100
NIGHTLY_SEED ?= 1

.PHONY: all deps build test e2e bench fuzz images lint clean conform nightly flags

all: build

deps:
	@./scripts/deps.sh

build: deps
	$(GO) build -o bin/ ./cmd/...

test: build
	$(GO) vet ./...
	$(GO) test -race -count=1 $(CONCURRENT)
	$(GO) test -count=1 $(SEQUENTIAL)

# The main job. Runs on Docker when an engine is reachable and on the local runtime otherwise.
e2e: build
	$(GINKGO) -r --keep-going --procs=$(E2E_PROCS) --junit-report=junit.xml --output-dir=artifacts $(E2E_FLAGS) ./e2e

# widetp conform against $(VLLM): every shipped scenario, then $(NIGHTLY_GENERATE) generated
# deployments (saved in artifacts/conform-generated/ to replay a disagreement). Tables in
# artifacts/conform-*.txt; exit 1 when either disagrees.
conform: build
	@if [ -z "$(VLLM)" ]; then echo "make $@ VLLM=path/to/vllm: a vLLM checkout (git clone https://github.com/vllm-project/vllm) or site-packages directory" >&2; exit 2; fi
	@mkdir -p artifacts
	@rc=0; \
	bin/widetp conform --vllm "$(VLLM)" --profile "$(NIGHTLY_PROFILE)" >artifacts/conform-shipped.txt || rc=1; \
	cat artifacts/conform-shipped.txt; \
	rm -rf artifacts/conform-generated; \
	bin/widetp conform --vllm "$(VLLM)" --profile "$(NIGHTLY_PROFILE)" --generate $(NIGHTLY_GENERATE) --seed $(NIGHTLY_SEED) \
		--write artifacts/conform-generated >artifacts/conform-generated.txt || rc=1; \
	cat artifacts/conform-generated.txt; \
	exit $$rc

# Regenerate the model's catalog of `vllm serve` options (vllm/flags_vllm.go) from $(VLLM)'s own
# parser; VLLM_NAME is how the file names that vLLM (README, "Which vLLM the model follows").
VLLM_NAME ?=
flags: deps
	@if [ -z "$(VLLM)" ]; then echo "make $@ VLLM=path/to/vllm: a vLLM checkout or site-packages directory" >&2; exit 2; fi
	$(GO) run ./vllm/internal/genflags -vllm "$(VLLM)" -out vllm/flags_vllm.go -name "$(VLLM_NAME)"

# What .github/workflows/nightly.yml runs: conform, then the e2e suite with $(VLLM) as the vllm
# planner's vLLM (every step runs; the target fails when any did).
nightly:
	@if [ -z "$(VLLM)" ]; then echo "make $@ VLLM=path/to/vllm: a vLLM checkout (git clone https://github.com/vllm-project/vllm) or site-packages directory" >&2; exit 2; fi
	@rc=0; \
	$(MAKE) conform VLLM="$(VLLM)" || rc=1; \
	WIDETP_VLLM="$(abspath $(VLLM))" WIDETP_VLLM_PROFILE="$(NIGHTLY_PROFILE)" $(MAKE) e2e || rc=1; \
	exit $$rc

# Time to verdict against the runtime's floor, 2 to 64 nodes, both runtimes (docs/bench: the
# README's table and plot), then the packages' Go benchmarks.
BENCH_FLAGS ?= --reps 3
bench: build
	bin/widetp bench --scenario scenarios/vllm48061-external-lb-wide-tp-buggy.yaml --out docs/bench $(BENCH_FLAGS)
	$(GO) test -run='^$$' -bench=. -benchmem $(UNIT)

# Every fuzz target of the repository (each `func Fuzz...` of a _test.go file) for FUZZTIME each:
# go test -fuzz takes one target of one package at a time. What a run finds lands in the package's
# testdata/fuzz, which `make test` then replays.
FUZZTIME ?= 30s
fuzz:
	@set -e; grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sort | while IFS=: read -r file fn; do \
		dir=$$(dirname "$$file"); name=$${fn#func }; \
		echo "fuzz $$name in $$dir for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) "$$dir"; \
	done

images: build
	bin/widetp images

lint: deps
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Removes everything labelled io.widetp.run (containers, networks, images) and the build output.
clean:
	-$(GO) run ./cmd/widetp clean
	rm -rf bin artifacts
