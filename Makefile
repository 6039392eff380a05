# Floodgate: `make run` starts the daemon, `make build` makes bin/floodgate,
# `make test` runs every test.
GO      ?= go
CONFIG  ?= examples/quickstart.yaml
DOCKER  ?= docker
IMAGE   ?= floodgate:dev

.PHONY: run build image test test-go lint test-stress chaos test-deploy test-image bench bench-middleware bench-daemon loadtest fuzz services-up services-down capacity bench-cluster reshard regionsim ratelimit-diff rlqssim

run:
	$(GO) -C cmd/floodgate run . serve -c $(abspath $(CONFIG))

# A static binary (CGO off, -trimpath) with the version, commit and date
# that `floodgate version` prints; scripts/build.sh holds the flags, which
# the Dockerfile uses too.
build:
	GO=$(GO) scripts/build.sh bin/floodgate

# The container image (docker or DOCKER=podman); the build context has no
# .git, so the stamps go in as build arguments.
image:
	$(DOCKER) build -t $(IMAGE) \
		--build-arg VERSION="$$(git describe --tags --always --dirty)" \
		--build-arg COMMIT="$$(git rev-parse HEAD)" \
		--build-arg DATE="$$(git log -1 --format=%cI)" .

# Starts the Redis instances, Redis Cluster, Sentinel, nginx, wrk and
# Chromium the tests need (scripts/services-up.sh), runs them with the race
# detector (and the memory-per-key test without it), and stops the services again if this run started them (running
# ones are reused and left running), keeping the tests' exit status.
test:
	@up=$$(scripts/services-up.sh) || exit 1; \
	status=0; $(MAKE) --no-print-directory test-go || status=$$?; \
	case "$$up" in *"started fresh"*) scripts/services-down.sh ;; esac; \
	exit $$status

# go.mod and go.sum of every module must be tidy (scripts/tidy-check.sh),
# and every module's Go files gofmt-clean and staticcheck-clean
# (scripts/lint.sh, staticcheck pinned there).
# The library's modules (the root and those nested in it, scripts/modules.sh
# library), the daemon (cmd/floodgate) and the gRPC example, each a module
# of its own (docs/ARCHITECTURE.md, "Modules"), are vetted and run with the
# race detector.
# The memory-per-key requirement is measured without the race detector,
# which skews heap figures; the bench module's one test checks that the
# peers are configured to the same limit, and its benchmarks compile.
# Every step runs even when an earlier one fails; any failure fails the
# target.
test-go:
	@status=0; \
	GO=$(GO) scripts/tidy-check.sh || status=1; \
	GO=$(GO) scripts/lint.sh || status=1; \
	for mod in $$(scripts/modules.sh library) cmd/floodgate examples/envoy/grpcservice; do \
		(. /tmp/floodgate-test/env && cd $$mod && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 8m ./...) || status=1; \
	done; \
	(cd examples/chi && $(GO) vet ./... && $(GO) test -count=1 ./...) || status=1; \
	$(GO) test -count=1 -run '^TestMemoryPerKey$$' ./memorystore || status=1; \
	(cd bench && $(GO) vet ./... && $(GO) test -count=1 -run '^(TestSameLimit|TestSimulate)$$' ./...) || status=1; \
	$(MAKE) --no-print-directory test-deploy || status=1; \
	exit $$status

# The Go tests (test-go) three times in a row while one busy loop per core
# (STRESS_LOOPS) saturates the machine: none may depend on its speed.
# Uses the running test services (scripts/services-up.sh).
STRESS_RUNS ?= 3
test-stress:
	scripts/test-stress.sh $(STRESS_RUNS)

# The ways to install and run it: `go install …@latest` from a release
# played into a scratch copy, the static binary in an empty root (what
# the image holds), the Kubernetes manifests, the Helm chart (linted and
# rendered by Helm, FLOODGATE_TEST_HELM), compose file and container
# configuration (deploy/ module), the systemd unit, and the Caddy example.
test-deploy:
	scripts/install-test.sh
	scripts/emptyroot-test.sh
	. /tmp/floodgate-test/env && cd deploy && $(GO) vet ./... && $(GO) test -count=1 ./...
	scripts/systemd-test.sh
	scripts/examples-test.sh

# The Dockerfile's final stage built and run with podman (installed from
# Debian when missing); not in `make test`, as it needs a container runtime.
test-image:
	scripts/image-test.sh

# Memory-store and middleware benchmarks against the peers (bench/ module).
bench:
	scripts/bench.sh

# The middleware over the wire with wrk: bare handler against wrapped.
bench-middleware:
	scripts/bench-middleware.sh

# Gateway and decision API over HTTP with wrk.
bench-daemon:
	scripts/bench-daemon.sh

# The capacity model's per-decision inputs on this machine (docs/SCALING.md),
# measured on the test suite's standalone Redis; about 2 minutes.
capacity:
	. /tmp/floodgate-test/env && cd bench && $(GO) run ./cmd/capacity -rounds 5

# 3- and 6-master Redis Clusters on ports 7700-7725, side by side with the
# standalone Redis, then the resharding check (scripts/bench-cluster.sh);
# about 5 minutes.
bench-cluster:
	. /tmp/floodgate-test/env && scripts/bench-cluster.sh all

# Only the resharding check: decisions stay exact while slots migrate.
reshard:
	scripts/bench-cluster.sh reshard

# The seeded multi-region simulation whose tables are in docs/SCALING.md.
regionsim:
	cd bench && $(GO) run ./cmd/regionsim

# Every request of scripts/testdata/ratelimit-diff/cases.txt sent to
# envoyproxy/ratelimit (installed with go install outside the repository)
# and to Floodgate at once, answers compared (docs/ENVOY.md); about 1 minute
# with ratelimit already installed.
ratelimit-diff:
	scripts/ratelimit-diff.sh

rlqssim:
	cd bench && $(GO) run ./cmd/rlqssim

# The gateway with its Redis killed and restarted, and under a saturated
# CPU (scripts/chaos.sh; figures in docs/OPERATIONS.md); about 2 minutes.
chaos:
	scripts/chaos.sh all

# The quickstart gateway under wrk-like load, with a summary table.
loadtest:
	scripts/loadtest.sh

# Runs every fuzz target (found by `go test -list '^Fuzz' ./...`) for
# FUZZTIME each (default 20s).
FUZZTIME ?= 20s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

lint:
	GO=$(GO) scripts/lint.sh

services-up:
	scripts/services-up.sh

services-down:
	scripts/services-down.sh
