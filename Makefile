# Floodgate: `make run` starts the daemon, `make test` runs every test.
GO      ?= go
CONFIG  ?= examples/quickstart.yaml

.PHONY: run test test-go bench bench-middleware bench-daemon loadtest fuzz services-up services-down

run:
	$(GO) run ./cmd/floodgate serve -c $(CONFIG)

# Starts the Redis instances, Redis Cluster, Sentinel, nginx, wrk and
# Chromium the tests need (scripts/services-up.sh), runs them with the race
# detector (and the memory-per-key test without it), and stops the services again if this run started them (running
# ones are reused and left running), keeping the tests' exit status.
test:
	@up=$$(scripts/services-up.sh) || exit 1; \
	status=0; $(MAKE) --no-print-directory test-go || status=$$?; \
	case "$$up" in *"started fresh"*) scripts/services-down.sh ;; esac; \
	exit $$status

# The memory-per-key requirement is measured without the race detector,
# which skews heap figures; the bench module's one test checks that the
# peers are configured to the same limit, and its benchmarks compile.
test-go:
	. /tmp/floodgate-test/env && $(GO) test -race -count=1 -timeout 8m ./...
	$(GO) test -count=1 -run '^TestMemoryPerKey$$' ./memorystore
	cd bench && $(GO) vet ./... && $(GO) test -count=1 -run '^TestSameLimit$$' ./...

# Memory-store and middleware benchmarks against the peers (bench/ module).
bench:
	scripts/bench.sh

# The middleware over the wire with wrk: bare handler against wrapped.
bench-middleware:
	scripts/bench-middleware.sh

# Gateway and decision API over HTTP with wrk.
bench-daemon:
	scripts/bench-daemon.sh

# The quickstart gateway under wrk-like load, with a summary table.
loadtest:
	scripts/loadtest.sh

# Runs each fuzz target for FUZZTIME (default 20s).
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzAlgorithmsSane -fuzztime $(FUZZTIME) ./algorithm
	for f in FuzzParsePolicy FuzzParseLimit FuzzParseRetryAfter FuzzParseLegacyReset FuzzDetect; do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./header || exit 1; done
	$(GO) test -run '^$$' -fuzz FuzzClientIP -fuzztime $(FUZZTIME) ./clientip

services-up:
	scripts/services-up.sh

services-down:
	scripts/services-down.sh
