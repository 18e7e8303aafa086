# weft — two commands on a fresh Debian machine with Go:
#   make demo   install what is missing, build, run the main demo
#   make test   install what the tests need, run the whole suite
#   make deb    build the Debian package (docs/deploy.md)
GO        ?= go
BIN       := $(CURDIR)/bin
NP        ?= 4
PROVIDER  ?= shm
export CGO_ENABLED := 1

.PHONY: test-verbs demo test deps test-deps bench-deps build deb vet bench bench-fabric bench-ddt bench-p2p bench-ddtpp bench-halo bench-osu bench-dashboard gpu-tests gpu-check bench-gpu clean lint

deps:
	@deploy/install-deps.sh build

test-deps:
	@deploy/install-deps.sh test

bench-deps:
	@deploy/install-deps.sh bench

build: deps
	$(GO) build -o $(BIN)/ ./cmd/... ./examples/...

# The Debian package (dpkg-deb only): bin/weft_VERSION_ARCH.deb with fabrun,
# the modulefile, docs and sbatch templates (docs/deploy.md).
deb: deps
	GO=$(GO) deploy/debian/build-deb.sh $(BIN)

demo: build
	$(BIN)/fabrun -n $(NP) --provider $(PROVIDER) --tag-output $(BIN)/hello

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@! git ls-files --eol | grep 'i/-text' || { echo "binary files are tracked by git (build outputs belong in bin/)"; exit 1; }

# staticcheck at a pinned version (staticcheck.conf: its checks), fetched and
# built by go run; not part of make test (about 2 minutes on 2 cores).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint: test-deps
	$(GO) run $(STATICCHECK) ./...

# The whole suite, then endpoint's suite again with every same-node peer on
# libfabric (WEFT_NODE_TRANSPORT=fabric; its multi-process tests set the
# transport per case), the race detector over the packages with goroutines,
# cgo or unsafe on their hot paths, then the fallback builds: ddt with bounds
# checks everywhere (weft_purego) and jit/ddt vetted for a non-amd64 target.
# The race pass runs the tests' provider variants on shm and the node
# transport only (WEFT_TEST_PROVIDERS=shm; the first pass runs their
# tcp;ofi_rxm and sockets variants): their Go code is the shm variants'
# code, and under the race detector they alone took a fifth of the suite's
# time on 2 cores. Multi-process matrices run a smaller set of cases there
# (testenv.Race), as launching race-built ranks costs seconds a case.
# go test runs packages in the order given: the launcher, cluster and
# packaging tests, which mostly wait on sshd, Slurm and dpkg, start beside
# the busiest packages instead of running last, side by side. The race
# pass starts its four longest packages first (jit, in path order, ran
# alone at the end for 30 s).
TEST_ORDER := ./endpoint ./collectives ./test/launchers ./onesided ./test/cluster ./test/deploy
# Packages whose code has no goroutines, shared state or unsafe (pure
# kernels, the assembler's encoder, test helpers) stay out of the race pass,
# and so do the example programs that run one goroutine a rank: their
# library code is raced by its own packages' tests (examples/endpoints,
# goroutines driving endpoints, stays in).
# The kernels behind unsafe pointers (memcopy, vecop) have no goroutines
# either; they run with checkptr alone (which -race turns on), their
# Go reference loops being 8 times slower under the race detector.
RACE_SEQUENTIAL := internal/(checked|choose|cpucache|fft|memcopy|testenv|vecop)|jit/internal/amd64|examples/(coupled|fft2d|halo|hello|histogram|jacobi|pgas)
CHECKPTR := ./internal/memcopy ./internal/vecop
# The passes run with -vet=off: the vet prerequisite has already run every
# analyzer go test would run before them. A race-built process sleeps a
# second at exit by default (GORACE atexit_sleep_ms) to let other threads
# report; the race pass launches hundreds of race-built ranks, each
# awaited by its test, so the sleep is off (a race found is still
# reported and fails the test: the report is written when the access
# happens, and the process exits with status 66).
RACE_ENV := GORACE=atexit_sleep_ms=0 WEFT_TEST_PROVIDERS=shm
test: test-deps vet
	$(GO) test -vet=off -count=1 -timeout 12m $(TEST_ORDER) ./...
	WEFT_NODE_TRANSPORT=fabric $(GO) test -vet=off -short -count=1 -timeout 5m ./endpoint/...
	$(RACE_ENV) $(GO) test -vet=off -race -short -count=1 -timeout 12m $$($(GO) list ./endpoint/... ./collectives/... ./onesided/... ./jit/... ./fabric/... ./am/... ./internal/... ./ddt/... ./examples/... | grep -v -E '/($(RACE_SEQUENTIAL))$$')
	$(GO) test -vet=off -count=1 -gcflags='./internal/...=-d=checkptr' $(CHECKPTR)
	$(GO) test -tags weft_purego -count=1 ./ddt/...
	GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./ddt/... ./jit/...

# Opt-in: verbs;ofi_rxm between two QEMU VMs with Soft-RoCE (root, minutes;
# see test/verbs/run.sh and docs/cluster-testing.md).
test-verbs: test-deps
	test/verbs/run.sh

# Side-by-side benchmarks (ratios go in docs/PERFORMANCE.md).
bench: bench-deps
	$(GO) test -run '^$$' -bench . -benchtime 200ms ./...

bench-fabric: bench-deps
	$(GO) run ./test/bench/pingpong -provider shm -reps 5

bench-ddt: bench-deps
	$(GO) run ./test/bench/ddtbench -json

# Point to point on one node: weft (both intra-node transports) against
# fi_pingpong, MPICH and Open MPI (each left out when not installed).
bench-p2p: bench-deps
	$(GO) run ./test/bench/p2p -reps 5 -weft native,fabric

# The DDTBench layouts as typed messages on one node: a ping-pong of each
# layout and size with weft's SendTyped/RecvTyped, the hand-written pack
# loop with a contiguous send, a contiguous send of as many bytes, and
# MPICH and Open MPI sending the same MPI datatype.
bench-ddtpp: bench-deps
	$(GO) run ./test/bench/ddtpp -reps 5

# A 2D halo exchange on one node: collectives.NeighborAlltoallw and
# persistent typed requests against MPICH's and Open MPI's
# MPI_Neighbor_alltoallw.
bench-halo: bench-deps
	$(GO) run ./test/bench/halo -np 2 -reps 5

# One reproduce command per area writing JSON into BENCH_OUT, then the
# tables of docs/PERFORMANCE.md regenerated from it (about 20 minutes on 2
# cores; run it on an otherwise idle machine).
BENCH_OUT ?= /tmp/weft-dashboard
# Collectives with OSU's loops against MPICH and Open MPI (2 and 4 ranks).
bench-osu: bench-deps
	$(GO) run ./test/bench/osu -reps 3

bench-dashboard: bench-deps
	test/bench/dashboard/run.sh $(BENCH_OUT)

# GPU: gpu-tests builds the test binaries of gpu/, endpoint/ and onesided/
# (go test -c) on any machine; gpu-check runs them on a machine with an
# NVIDIA GPU and its driver, building nothing there: every real-GPU test
# (WEFT_REQUIRE=gpu: a missing device fails instead of skipping), then the
# GPU benchmark (-test.v: the cost model's choice per layout is logged;
# 0.5 s per case, not a count: 65536 per-block copies take a while), then
# the GPU message and one-sided benchmarks. The machine needs the NVIDIA
# driver, not Go; gpu-tests bundles this machine's libfabric and its
# libraries into $(GPU_BIN)/lib, used where the GPU machine has none. Each
# step runs even when an earlier one failed; the target fails if any did.
# About 3 minutes on an H200; the steps' timeouts add up to 33.
GPU_BIN := $(BIN)/gpu
gpu-tests:
	mkdir -p $(GPU_BIN)
	$(GO) test -c -o $(GPU_BIN)/gpu.test ./gpu
	$(GO) test -c -o $(GPU_BIN)/endpoint.test ./endpoint
	$(GO) test -c -o $(GPU_BIN)/onesided.test ./onesided
	deploy/bundle-libfabric.sh $(GPU_BIN)/lib

gpu-check:
	@test -x $(GPU_BIN)/gpu.test || { echo "gpu-check: run 'make gpu-tests' first (it builds the test binaries)"; exit 1; }
	@st=0; \
	if ! ldconfig -p 2>/dev/null | grep -q 'libfabric\.so\.1 '; then \
		echo "gpu-check: no libfabric on this machine; using the one bundled in $(GPU_BIN)/lib"; \
		export LD_LIBRARY_PATH=$(GPU_BIN)/lib$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}; \
	fi; \
	(cd gpu && WEFT_REQUIRE=gpu timeout 14m $(GPU_BIN)/gpu.test -test.run 'CUDA' -test.v -test.timeout 14m) || st=1; \
	(cd endpoint && WEFT_REQUIRE=gpu timeout 3m $(GPU_BIN)/endpoint.test -test.run 'TestDeviceTypedCUDA' -test.v -test.timeout 3m) || st=1; \
	(cd onesided && WEFT_REQUIRE=gpu timeout 3m $(GPU_BIN)/onesided.test -test.run 'TestDeviceTypedCUDA' -test.v -test.timeout 3m) || st=1; \
	(cd gpu && timeout 8m $(GPU_BIN)/gpu.test -test.run '^$$' -test.bench . -test.benchtime 0.5s -test.count 5 -test.v -test.timeout 8m) || st=1; \
	(cd endpoint && timeout 3m $(GPU_BIN)/endpoint.test -test.run '^$$' -test.bench 'DeviceTypedSend|DeviceTypedPingPong' -test.benchtime 200x -test.count 5 -test.v -test.timeout 3m) || st=1; \
	(cd onesided && timeout 2m $(GPU_BIN)/onesided.test -test.run '^$$' -test.bench 'DevicePut|DeviceGet' -test.benchtime 20x -test.count 5 -test.v -test.timeout 2m) || st=1; \
	exit $$st

# The GPU benchmark on whatever device is here (CUDA, else OpenCL: pocl on
# a CPU), side by side: generated kernel, 2D copy, per-block copies,
# hand-written kernel, contiguous copy.
bench-gpu: test-deps
	flock /tmp/weft-bench.lock $(GO) test -run '^$$' -bench . -benchtime 200x -count 5 ./gpu

clean:
	rm -rf $(BIN)
