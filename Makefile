# tranche — see README.md. `make up` starts a local cluster, `make test` runs every test.
GO      ?= go
BIN     := bin/tranche
PKGS    := ./...
DEBS    := nftables iptables ipvsadm iproute2 busybox-static runc conntrack dnsutils etcd-server curl ca-certificates nginx postgresql dnsperf wrk
KUBECTL ?= $(shell command -v kubectl)

.PHONY: all build deps generate up test test-unit test-e2e bench bench-api bench-endpointslice bench-proxy bench-proxy-modes bench-dns bench-stream bench-cluster bench-workloads bench-ingress bench-netprog bench-datapath bench-netpol fuzz clean conformance

all: build

# The pause image's small program is built first: the tranche binary embeds it (see
# internal/imagebuild/prebuilt/README.md).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o internal/imagebuild/prebuilt/pause ./internal/imagebuild/pause
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/tranche

# deps installs the Debian packages the tests and the cluster need (as root), only
# those that are missing, and checks that kubectl is there.
deps:
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root to install$$missing" >&2; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@command -v kubectl >/dev/null || { echo "make deps: kubectl (v1.32) is required on PATH" >&2; exit 1; }

# generate regenerates committed generated code: the OpenAPI definitions of the served API
# types (hack/update-openapi.sh, k8s.io/kube-openapi's openapi-gen).
generate:
	./hack/update-openapi.sh

up: deps build
	$(BIN) up

# test runs the unit tests beside the e2e tests (hack/test.sh says how and why);
# test-unit and test-e2e run each alone.
test: deps build
	TRANCHE_BIN=$(CURDIR)/$(BIN) GO=$(GO) ./hack/test.sh

test-unit:
	$(GO) test -count=1 -timeout 10m $$($(GO) list ./... | grep -v /test/e2e)

# The e2e tests run as two shards at once (hack/test-e2e.sh says which and why).
test-e2e: build
	TRANCHE_BIN=$(CURDIR)/$(BIN) GO=$(GO) ./hack/test-e2e.sh

# Benchmarks print their figures beside a peer or limit measured in the same run (see each
# bench/*/README.md). Most need root; `make bench` runs them all (about 20 minutes).
BENCH   := $(GO) test -run '^$$' -bench . -benchtime 1x
bench: bench-api bench-endpointslice bench-proxy bench-proxy-modes bench-dns bench-stream bench-cluster bench-workloads bench-ingress bench-netprog bench-datapath bench-netpol

bench-api: build
	$(BENCH) -timeout 20m ./bench/api/

bench-endpointslice:
	$(BENCH) -timeout 30m ./bench/endpointslice/

bench-proxy:
	$(GO) test -run '^$$' -bench '^Benchmark(Proxy|IPTables)$$' -benchtime 1x -timeout 20m ./bench/proxy/

# Issue 18: the three proxy modes side by side (sync table, first-packet cost; the data
# path per mode is bench-datapath's).
bench-proxy-modes: deps bench-datapath
	$(GO) test -run '^$$' -bench '^Benchmark(ProxyModes|FirstPacket)$$' -benchtime 1x -timeout 30m ./bench/proxy/

bench-dns: deps
	$(BENCH) -timeout 10m ./bench/dns/

bench-stream: build
	TRANCHE_BIN=$(CURDIR)/$(BIN) $(BENCH) -timeout 10m ./bench/stream/

bench-cluster: build
	TRANCHE_BIN=$(CURDIR)/$(BIN) $(BENCH) -timeout 15m ./bench/cluster/

bench-workloads: build
	TRANCHE_BIN=$(CURDIR)/$(BIN) $(BENCH) -timeout 20m ./bench/workloads/

bench-ingress: deps
	$(BENCH) -timeout 10m ./bench/ingress/

bench-netprog: build
	TRANCHE_BIN=$(CURDIR)/$(BIN) $(BENCH) -timeout 15m ./bench/netprog/

bench-datapath: deps build
	TRANCHE_BIN=$(CURDIR)/$(BIN) $(BENCH) -timeout 15m ./bench/datapath/

bench-netpol: deps build
	TRANCHE_BIN=$(CURDIR)/$(BIN) $(BENCH) -timeout 30m ./bench/netpol/

# Issue 22: five simulated machines over VXLAN (network programming, pod to pod across
# machines vs within one) and the elected server's failover; see bench/machines/README.md.
.PHONY: bench-machines
bench: bench-machines bench-ha
bench-machines: deps build
	TRANCHE_BIN=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench Machines -benchtime 1x -timeout 20m ./test/e2e/

# Issue 20: Kubernetes' own [Conformance] e2e specs (v1.37.2) against a fresh `tranche up`;
# writes conformance/README.md. Not part of `make test`: the first run builds e2e.test
# (~30 minutes on 2 cores, cached after). AREAS=... and CONFORMANCE_FOCUS=... run a subset.
conformance: deps build
	./conformance/run

clean:
	rm -rf bin

# Issue 22: create throughput through two API servers over a 3-member etcd cluster on
# simulated machines vs the same cluster's raw puts (bench/ha/README.md).
bench-ha: deps build
	TRANCHE_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -run '^$$' -bench '^BenchmarkHA$$' -benchtime 2000x -timeout 15m ./test/e2e/
