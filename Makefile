# regroup — build, test and measure.
#
#   make test    go vet, then the whole test suite under the race detector
#   make demo    go run ./cmd/regroup demo: a group forked and repaired, on the embedded default
#   make examples build every example and run each runnable one
#   make help    this list
#   make bench   every benchmark, each printed next to its in-run reference
#   make fuzz    every fuzz target for FUZZTIME (default 30s) each
#   make fuzz-ci every fuzz target briefly (FUZZCI_TIME, default 200x: 200 inputs each), as CI runs it
#   make hostile the client's scenarios under every delivery-service fault and HOSTILE_MIXES random mixes
#   make proto   regenerate the committed Go from proto/**/*.proto
#   make wire    regenerate wire_gen.go from wire.go
#   make lint    gofmt check, go vet, staticcheck
#   make build   every binary into ./bin
#   make load    the delivery-service load, fault, replica and fan-out runs (not part of test)
#   make attack  the long attack run: every attack, then the fair-share table (not part of test)
#   make interop the MLS engine against ts-mls and the mlswg harness scripts
#   make interop-long the part of make interop that make test does not run (the driver's self-test, the long harness runs)
#   make bench-peers the MLS engine next to ts-mls on the same operations (not part of test)
#   make acceptance  ACCEPTANCE_COMMITS (default 200) random commits, resyncs and fork readds included, followed by a commit-accepting regroupd, SIGKILL included (not part of test)

GO        ?= go
FUZZTIME  ?= 30s
FUZZMINIMIZE ?= 0
FUZZCI_TIME ?= 200x
FUZZJOBS ?= 1
FUZZCI_JOBS ?= 2
HOSTILE_MIXES ?= 200
ACCEPTANCE_COMMITS ?= 200
BENCHTIME ?= 1s
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin

WIRE_VERSION               := v0.7.0
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
STATICCHECK_VERSION        := v0.8.2

.PHONY: test demo examples help bench bench-peers fuzz fuzz-ci hostile proto wire lint build load attack interop interop-long tools acceptance

test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 25m ./...

help:
	@sed -n '1,/^$$/p' $(firstword $(MAKEFILE_LIST)) | sed 's/^# \{0,1\}//'

# The README's main command: the demo on the embedded default (a delivery
# service in-process on SQLite in a temporary directory). It exits
# non-zero when an expected outcome fails, so CI runs it as a smoke test.
demo:
	$(GO) run ./cmd/regroup demo

# Every example is built into bin/examples, then each runnable one runs:
# embed and custom-store on their own, plugin-host loading plugin-xwing
# pinned from a temporary plugin directory, and fork-repair.
EXAMPLES_BIN := bin/examples
examples:
	@mkdir -p $(EXAMPLES_BIN)
	$(GO) build -o $(EXAMPLES_BIN)/ ./examples/...
	$(EXAMPLES_BIN)/embed
	$(EXAMPLES_BIN)/custom-store
	@set -e; plugins=$$(mktemp -d); trap 'rm -rf "$$plugins"' EXIT; \
		cp $(EXAMPLES_BIN)/plugin-xwing "$$plugins/regroup-plugin-xwing"; \
		sum=$$(sha256sum "$$plugins/regroup-plugin-xwing" | cut -d' ' -f1); \
		echo "$(EXAMPLES_BIN)/plugin-host -dir $$plugins -pin regroup-plugin-xwing=$$sum"; \
		$(EXAMPLES_BIN)/plugin-host -dir "$$plugins" -pin "regroup-plugin-xwing=$$sum"
	$(EXAMPLES_BIN)/fork-repair

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 60m ./...

# Every "func FuzzXxx" in a _test.go file is a target; each runs for FUZZTIME.
# Minimization is off by default: Go's fuzzing coordinator reports a
# minimization that -fuzztime cuts short as a failing input whose error is
# "context deadline exceeded", which targets with large inputs (stored group
# state) hit now and then. A crasher is still written to testdata/fuzz;
# minimize it with FUZZMINIMIZE=30s or go test -fuzzminimizetime by hand.
# FUZZJOBS targets run at once (each builds its own instrumented test
# binary, which is most of a short run's time).
fuzz:
	@set -e; grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . \
		| sed -E 's#^\./(.*)/[^/]+_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]*)\(.*#./\1 \2#' \
		| sort -u | xargs -P $(FUZZJOBS) -L 1 sh -c \
		'out=$$($(GO) test -run "^\$$" -fuzz "^$$1\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) "$$0" 2>&1); rc=$$?; \
		printf "== %s %s ($(FUZZTIME))\n%s\n" "$$0" "$$1" "$$out"; exit $$rc'

# The bounded run CI makes of every fuzz target: each starts from its seed
# corpus (f.Add seeds and testdata/fuzz, valid messages of the engine and
# the services) and mutates for FUZZCI_TIME. A crasher fails the step and
# is written to the target's testdata/fuzz.
fuzz-ci:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZCI_TIME) FUZZJOBS=$(FUZZCI_JOBS)

# The hostile delivery service: every scenario under each fault, then
# HOSTILE_MIXES seeded random mixes of three faults (make test runs a
# smaller number of mixes; see internal/hostile and docs/reliability.md).
hostile:
	REGROUP_HOSTILE_MIXES=$(HOSTILE_MIXES) $(GO) test -count=1 -timeout 20m ./internal/hostile/

tools:
	GOFLAGS= $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOFLAGS= $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

proto: tools
	cd proto && PATH="$(GOBIN_DIR):$$PATH" protoc -I . \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative \
		$$(find . -name '*.proto' | sort)

# wire_gen.go from wire.go (google/wire, pinned).
wire:
	GOFLAGS=-mod=mod $(GO) run github.com/google/wire/cmd/wire@$(WIRE_VERSION) .

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) 2>/dev/null; then \
		$(GOBIN_DIR)/staticcheck ./...; \
	else echo "staticcheck $(STATICCHECK_VERSION) did not install from the module proxy; skipped"; fi

build:
	$(GO) build -o bin/ ./cmd/...

# The delivery-service load and fault run: PostgreSQL too when
# REGROUP_POSTGRES_DSN is set (required under CI=true), with REPLICAS
# regroupd processes sharing the database (one of them SIGKILLed in the
# fault run) beside the single-process runs. Each steady run prints the
# processes' /metrics beside its own figures. The fan-out run sends one
# 320 KiB group message to FANOUT subscription streams beside a server
# that only writes the same bytes: `make load FANOUT=10000`. It completes
# at regroupd's default read budget (docs/performance.md, "One commit to
# 10,000 subscribers"), and is off (0) by default because it adds about
# 2.5 minutes per database, more than the rest of the run, and its rounds
# (120 s each at most) can be missed on an oversubscribed machine.
REPLICAS ?= 3
FANOUT ?= 0
load:
	$(GO) build -o bin/regroupd ./cmd/regroupd
	$(GO) run ./cmd/regroup-load -regroupd bin/regroupd -publishers 16 -topics 8 -duration 10s -replicas $(REPLICAS) -fanout $(FANOUT)

# The long attack run against a regroupd built from this tree, on SQLite
# and, with REGROUP_POSTGRES_DSN, on PostgreSQL: the earlier attacks with
# larger sizes, then the fair-share run (each adversary alone and all at
# once beside honest clients), printing peak RSS against its bound and
# honest p50/p99 against the unloaded run. Its short form is part of test.
acceptance:
	REGROUP_ACCEPTANCE_COMMITS=$(ACCEPTANCE_COMMITS) $(GO) test -count=1 -timeout 60m -run 'TestCOMP370_ServiceFollowsRandomCommits' ./cmd/regroupd/

attack:
	$(GO) build -o bin/regroupd ./cmd/regroupd
	$(GO) run ./cmd/regroup-attack -regroupd bin/regroupd -long

# The MLS engine and ts-mls 1.6.4 on the same operations at 10, 100 and
# 1,000 members, in one run, with the ratio per cell. Needs node and npm
# (npm ci runs when interop/tsmls/node_modules is absent).
bench-peers:
	$(GO) run ./interop/tsmls/benchpeers

# Interoperability: the ts-mls driver's self-test, the engine against
# ts-mls 1.6.4, the mlswg harness scripts, and the long runs: deep_random and
# every config in every suite.
# Needs node and npm; the Go test runs npm ci when node_modules is absent.
interop:
	$(GO) test -race -count=1 ./interop/tsmls/... ./cmd/mls-interop-client/...
	@$(MAKE) --no-print-directory interop-long

# The part of make interop that make test does not run: the driver's
# self-test and the long harness runs. CI runs it after make test.
interop-long:
	cd interop/tsmls && ( [ -d node_modules ] || npm ci --no-audit --no-fund ) && node selftest.mjs
	MLS_INTEROP_DEEP=1 $(GO) test -count=1 -timeout 30m -run 'TestHarnessDeepRandom|TestHarnessEverySuite' ./cmd/mls-interop-client/
