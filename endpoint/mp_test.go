package endpoint_test

// Multi-process tests: each test re-executes the test binary as N ranks
// through launchtest.Run (weft's local launcher); the worker branch is the
// rank's body. They run on the node transport ("native": peers on this
// node talk through weft's rings, libfabric shm is opened but idle), on
// libfabric's shm provider and on tcp;ofi_rxm (both with
// WEFT_NODE_TRANSPORT=fabric, so that every message goes through the
// provider).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
)

var providers = []string{"native", "shm", "tcp;ofi_rxm"}

// hdrProviders are the libfabric providers with match-header mode forced
// (WEFT_TUNE epmatchhdr=1): the framing endpoints use on providers with
// less than 8 bytes of remote CQ data (verbs;ofi_rxm). A representative
// subset of the multi-process tests also runs on them.
var hdrProviders = []string{"shm+hdr", "tcp;ofi_rxm+hdr"}

// withHdr is providers followed by hdrProviders.
var withHdr = append(append([]string(nil), providers...), hdrProviders...)

const hdrSuffix = "+hdr"

// hdrOff reports whether the variant p of a test does not run: a
// match-header variant runs where the test's subset has it (inSubset),
// and with -short only on shm where shortToo (make test runs the
// endpoint tests three times, twice with -short).
func hdrOff(p string, inSubset, shortToo bool) bool {
	if !strings.HasSuffix(p, hdrSuffix) {
		return false
	}
	return !inSubset || testing.Short() && (!shortToo || p != "shm"+hdrSuffix)
}

func provName(p string) string {
	base, hdr := strings.CutSuffix(p, hdrSuffix)
	if base == "tcp;ofi_rxm" {
		base = "tcp"
	}
	if hdr {
		return base + "-hdr"
	}
	return base
}

// launch runs the calling test as n ranks through launchtest, or returns
// false in a worker.
func launch(t *testing.T, n int, provider string, timeout time.Duration, env ...string) bool {
	t.Helper()
	if launchtest.IsWorker() {
		return false
	}
	skipRepeatPass(t)
	provider, env = provEnv(provider, env)
	launchtest.Run(t, n, provider, timeout, env...)
	return true
}

// skipRepeatPass skips a multi-process test in make test's second pass
// over this package, which sets WEFT_NODE_TRANSPORT=fabric (with -short)
// for the in-process tests: every multi-process test sets each rank's
// transport itself, so that pass would run it exactly as the first did.
func skipRepeatPass(t *testing.T) {
	t.Helper()
	if v := os.Getenv(endpoint.EnvNodeTransport); v != "" && testing.Short() {
		testenv.Skip(t, "long", "the ranks' transport is set by the test, so %s=%s repeats the first pass", endpoint.EnvNodeTransport, v)
	}
}

// provEnv maps an entry of providers to the libfabric provider and the
// environment of its ranks.
func provEnv(p string, env []string) (string, []string) {
	if base, ok := strings.CutSuffix(p, hdrSuffix); ok {
		p = base
		env = append(env, "WEFT_TUNE=epmatchhdr=1")
	}
	if p == "native" {
		return "shm", append(env, endpoint.EnvNodeTransport+"=native")
	}
	return p, append(env, endpoint.EnvNodeTransport+"=fabric")
}

func initWorld(t *testing.T) *endpoint.World {
	t.Helper()
	w := eptest.InitWorld(t)
	if strings.Contains(os.Getenv("WEFT_TUNE"), "epmatchhdr=1") && !endpoint.MatchHeader(w) {
		t.Fatal("WEFT_TUNE=epmatchhdr=1, but the world endpoint carries the match word in CQ data")
	}
	return w
}

// pattern fills b with bytes determined by (src, dst, salt).
func pattern(b []byte, src, dst, salt int) {
	x := uint32(src*7919 + dst*104729 + salt*15485863 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestWorldBarrierAllgather: ranks, barrier, allgather of different sizes.
func TestWorldBarrierAllgather(t *testing.T) {
	for _, p := range providers {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 4, p, 60*time.Second) {
				return
			}
			w := initWorld(t)
			c := w.Comm()
			if c.Size() != 4 {
				t.Fatalf("size %d", c.Size())
			}
			ctx := eptest.Ctx(t, 30*time.Second)
			if err := c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			mine := bytes.Repeat([]byte{byte(c.Rank())}, c.Rank()*100+1)
			all, err := c.Allgather(ctx, mine)
			if err != nil {
				t.Fatal(err)
			}
			for r, b := range all {
				if want := bytes.Repeat([]byte{byte(r)}, r*100+1); !bytes.Equal(b, want) {
					t.Fatalf("allgather from rank %d: %d bytes, want %d", r, len(b), len(want))
				}
			}
			lr, ls := c.NodeLocal()
			if ls != 4 || lr != c.Rank() {
				t.Fatalf("NodeLocal = %d,%d on one host", lr, ls)
			}
			if c.Info() == nil || c.Domain() == nil {
				t.Fatal("no Info/Domain")
			}
			if err := c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// allPairs: every handle sends a content-checked message of several sizes
// (inject, eager, rendezvous) to every other rank and receives from all.
func allPairs(t *testing.T, eps []*endpoint.Comm, sizes []int) {
	runHandles(t, eptest.Ctx(t, 60*time.Second), eps, func(ctx context.Context, c *endpoint.Comm) error {
		me, n := c.Rank(), c.Size()
		var reqs []*endpoint.Request
		recvs := make(map[[2]int][]byte)
		for src := 0; src < n; src++ {
			if src == me {
				continue
			}
			for si, sz := range sizes {
				b := make([]byte, sz)
				recvs[[2]int{src, si}] = b
				r, err := c.Irecv(b, src, si)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
		}
		for i := 1; i < n; i++ {
			dst := (me + i) % n
			for si, sz := range sizes {
				b := make([]byte, sz)
				pattern(b, me, dst, si)
				r, err := c.Isend(b, dst, si)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
		}
		if err := endpoint.WaitAll(ctx, reqs...); err != nil {
			return fmt.Errorf("rank %d: %w", me, err)
		}
		want := make([]byte, 0)
		for k, b := range recvs {
			want = append(want[:0], make([]byte, len(b))...)
			pattern(want, k[0], me, k[1])
			if !bytes.Equal(b, want) {
				return fmt.Errorf("rank %d: %d bytes from rank %d corrupted", me, len(b), k[0])
			}
		}
		return c.Barrier(ctx)
	})
}

// TestAllPairs: -n 2 and -n 4 × 1 and 4 endpoints per process, private and
// shared, on the node transport and shm; on tcp;ofi_rxm -n 2 with one
// endpoint and -n 4 with 4, private and shared. Under the race detector
// the cases of 4 endpoints, -n 2 shared and -n 4 private.
func TestAllPairs(t *testing.T) {
	for _, p := range withHdr {
		for _, np := range []int{2, 4} {
			for _, neps := range []int{1, 4} {
				for _, shared := range []bool{false, true} {
					if shared && neps == 1 {
						continue
					}
					if hdrOff(p, np == 2 && neps == 1 && !shared, false) {
						continue
					}
					if p == "tcp;ofi_rxm" && (np == 2) != (neps == 1) {
						continue // tcp: each size, handle count and mode once (4 s a case on 2 cores)
					}
					if testenv.Race && (neps == 1 || shared != (np == 2)) {
						continue // the race detector: the cases with goroutines of several handles, each mode once
					}
					mode := "private"
					if shared {
						mode = "shared"
					}
					name := fmt.Sprintf("%s/n%d/ep%d/%s", provName(p), np, neps, mode)
					t.Run(name, func(t *testing.T) {
						if launch(t, np, p, 90*time.Second, "WEFT_TEST_EPS="+strconv.Itoa(neps), "WEFT_ENDPOINT_SHARED="+strconv.FormatBool(shared)) {
							return
						}
						w := initWorld(t)
						ctx := eptest.Ctx(t, 30*time.Second)
						eps, err := w.Comm().CreateEndpoints(ctx, envInt("WEFT_TEST_EPS", 1))
						if err != nil {
							t.Fatal(err)
						}
						if got := eps[0].Size(); got != np*neps {
							t.Fatalf("endpoint comm size %d, want %d", got, np*neps)
						}
						for i, e := range eps {
							if e.Rank() != w.Comm().Rank()*neps+i {
								t.Fatalf("handle %d has rank %d", i, e.Rank())
							}
							if e.Shared() != shared {
								t.Fatalf("handle %d shared=%v", i, e.Shared())
							}
						}
						allPairs(t, eps, []int{0, 8, 3000, 20000, 200000})
						for _, e := range eps {
							if err := e.Free(); err != nil {
								t.Error(err)
							}
						}
					})
				}
			}
		}
	}
}

// TestAnySourceOrdering: rank 0 receives every message with AnySource (and
// AnyTag for half); per sender, messages must arrive in send order, across
// eager and rendezvous sizes.
func TestAnySourceOrdering(t *testing.T) {
	for _, p := range withHdr {
		if hdrOff(p, true, true) {
			continue
		}
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 3, p, 60*time.Second) {
				return
			}
			w := initWorld(t)
			c := w.Comm()
			ctx := eptest.Ctx(t, 30*time.Second)
			const k = 40
			size := func(i int) int {
				if i%10 == 9 {
					return 40000 // rendezvous in the middle of eager ones
				}
				return 8 + i
			}
			if c.Rank() == 0 {
				next := map[int]int{1: 0, 2: 0}
				for got := 0; got < 2*k; got++ {
					buf := make([]byte, 40000)
					tag := 5
					if got%2 == 1 {
						tag = endpoint.AnyTag
					}
					st, err := c.Recv(ctx, buf, endpoint.AnySource, tag)
					if err != nil {
						t.Fatal(err)
					}
					i := int(buf[0])
					if st.Tag != 5 || i != next[st.Source] || st.Count != size(i) {
						t.Fatalf("from %d: seq %d (want %d) tag %d count %d", st.Source, i, next[st.Source], st.Tag, st.Count)
					}
					next[st.Source]++
				}
			} else {
				for i := 0; i < k; i++ {
					b := make([]byte, size(i))
					b[0] = byte(i)
					if err := c.Send(ctx, b, 0, 5); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRendezvous64MiB: a 64 MiB []float64 through the rendezvous path
// (the receiver reads the sender's registered slice); under the race
// detector on the node transport only.
func TestRendezvous64MiB(t *testing.T) {
	for _, p := range withHdr {
		if hdrOff(p, p == "shm"+hdrSuffix, false) {
			continue
		}
		if testenv.Race && provName(p) != "native" {
			continue // the race detector: one 64 MiB transfer (11 s of instrumented copies on shm)
		}
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 2, p, 120*time.Second) {
				return
			}
			w := initWorld(t)
			eps, err := w.Comm().CreateEndpoints(eptest.Ctx(t, 30*time.Second), 1)
			if err != nil {
				t.Fatal(err)
			}
			c := eps[0]
			ctx := eptest.Ctx(t, 90*time.Second)
			n := 64 << 20 / 8
			buf := make([]float64, n)
			if c.Rank() == 0 {
				for i := range buf {
					buf[i] = float64(i) * 0.5
				}
				if err := endpoint.SendSlice(ctx, c, buf, 1, 3); err != nil {
					t.Fatal(err)
				}
			} else {
				st, err := endpoint.RecvSlice(ctx, c, buf, 0, 3)
				if err != nil {
					t.Fatal(err)
				}
				if st.Count != 64<<20 || st.Source != 0 || st.Tag != 3 {
					t.Fatalf("status %+v", st)
				}
				for i, x := range buf {
					if x != float64(i)*0.5 {
						t.Fatalf("element %d = %v", i, x)
					}
				}
			}
			if err := c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			c.Free()
		})
	}
}

// TestTruncationCancelProbe: truncation (eager, tiny buffer, rendezvous),
// cancel of an unmatched receive, Iprobe/Probe leaving messages queued.
func TestTruncationCancelProbe(t *testing.T) {
	for _, p := range withHdr {
		if hdrOff(p, true, true) {
			continue
		}
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 2, p, 60*time.Second) {
				return
			}
			w := initWorld(t)
			eps, err := w.Comm().CreateEndpoints(eptest.Ctx(t, 30*time.Second), 1)
			if err != nil {
				t.Fatal(err)
			}
			c := eps[0]
			ctx := eptest.Ctx(t, 30*time.Second)
			sizes := []int{100, 20, 100000}
			if c.Rank() == 0 {
				for i, sz := range sizes {
					b := make([]byte, sz)
					pattern(b, 0, 1, i)
					if err := c.Send(ctx, b, 1, i); err != nil {
						t.Fatalf("send %d: %v", sz, err)
					}
				}
				// probe targets
				for i, sz := range []int{64, 50000} {
					b := make([]byte, sz)
					pattern(b, 0, 1, 10+i)
					if err := c.Send(ctx, b, 1, 10+i); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				for i, sz := range sizes {
					b := make([]byte, 10)
					st, err := c.Recv(ctx, b, 0, i)
					if !errors.Is(err, endpoint.ErrTruncated) {
						t.Fatalf("%d bytes into 10: err %v", sz, err)
					}
					want := make([]byte, sz)
					pattern(want, 0, 1, i)
					if !bytes.Equal(b, want[:10]) {
						t.Fatalf("%d bytes into 10: prefix wrong", sz)
					}
					if st.Count != 10 {
						t.Errorf("%d bytes into 10: count %d", sz, st.Count)
					}
				}
				r, err := c.Irecv(make([]byte, 8), 0, 99)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Cancel(); err != nil {
					t.Fatal(err)
				}
				st, err := r.Wait(ctx)
				if !errors.Is(err, endpoint.ErrCanceled) || !st.Canceled {
					t.Fatalf("cancelled receive: %+v %v", st, err)
				}
				if ok, _, err := c.Iprobe(0, 77); ok || err != nil {
					t.Fatalf("Iprobe of nothing: %v %v", ok, err)
				}
				for i, sz := range []int{64, 50000} {
					st, err := c.Probe(ctx, 0, endpoint.AnyTag)
					if err != nil || st.Count != sz || st.Tag != 10+i {
						t.Fatalf("probe: %+v %v", st, err)
					}
					ok, st2, err := c.Iprobe(endpoint.AnySource, 10+i)
					if !ok || err != nil || st2 != st {
						t.Fatalf("iprobe after probe: %v %+v %v", ok, st2, err)
					}
					b := make([]byte, sz)
					if st, err = c.Recv(ctx, b, 0, 10+i); err != nil || st.Count != sz {
						t.Fatalf("recv after probe: %+v %v", st, err)
					}
					want := make([]byte, sz)
					pattern(want, 0, 1, 10+i)
					if !bytes.Equal(b, want) {
						t.Fatalf("probed message of %d bytes corrupted", sz)
					}
				}
			}
			if err := c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSplitDupIsolation: the same (source, tag) on the world, a Dup and a
// Split communicator never cross, even with receives posted in reverse
// communicator order.
func TestSplitDupIsolation(t *testing.T) {
	for _, p := range providers {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 4, p, 60*time.Second) {
				return
			}
			w := initWorld(t)
			ctx := eptest.Ctx(t, 30*time.Second)
			world := w.Comm()
			dup, err := world.Dup(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if dup.ContextID() == world.ContextID() {
				t.Fatal("dup shares the context id")
			}
			// odd/even split, reversed order inside each half
			sp, err := world.Split(ctx, world.Rank()%2, -world.Rank())
			if err != nil {
				t.Fatal(err)
			}
			if sp.Size() != 2 || sp.Rank() != 1-world.Rank()/2 {
				t.Fatalf("split: rank %d size %d", sp.Rank(), sp.Size())
			}
			for r := range 2 { // rank r of the half is world rank 2(1−r)+parity
				if wr, err := sp.WorldRank(r); err != nil || wr != 2*(1-r)+world.Rank()%2 {
					t.Fatalf("WorldRank(%d) of the split: %d, %v", r, wr, err)
				}
			}
			if _, err := sp.WorldRank(2); !errors.Is(err, endpoint.ErrInvalid) {
				t.Fatalf("WorldRank past the split's size: %v", err)
			}
			none, err := world.Split(ctx, endpoint.Undefined, 0)
			if err != nil || none != nil {
				t.Fatalf("undefined color: %v %v", none, err)
			}
			comms := []*endpoint.Comm{world, dup, sp}
			peer := func(c *endpoint.Comm) int { return (c.Rank() + 1) % c.Size() }
			from := func(c *endpoint.Comm) int { return (c.Rank() - 1 + c.Size()) % c.Size() }
			var reqs []*endpoint.Request
			bufs := make([][]byte, len(comms))
			for i := len(comms) - 1; i >= 0; i-- {
				bufs[i] = make([]byte, 16)
				r, err := comms[i].Irecv(bufs[i], from(comms[i]), 7)
				if err != nil {
					t.Fatal(err)
				}
				reqs = append(reqs, r)
			}
			for i, c := range comms {
				msg := []byte(fmt.Sprintf("comm%d-from%-6d", i, c.Rank()))
				r, err := c.Isend(msg, peer(c), 7)
				if err != nil {
					t.Fatal(err)
				}
				reqs = append(reqs, r)
			}
			if err := endpoint.WaitAll(ctx, reqs...); err != nil {
				t.Fatal(err)
			}
			for i, c := range comms {
				if want := fmt.Sprintf("comm%d-from%-6d", i, from(c)); string(bufs[i]) != want {
					t.Fatalf("comm %d got %q, want %q", i, bufs[i], want)
				}
			}
			// Dup/Split of an endpoints communicator.
			eps, err := world.CreateEndpoints(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			runHandles(t, ctx, eps, func(ctx context.Context, e *endpoint.Comm) error {
				for r := range e.Size() { // two handles a process, in world order
					if wr, err := e.WorldRank(r); err != nil || wr != r/2 {
						return fmt.Errorf("WorldRank(%d) of an endpoints communicator: %d, %v", r, wr, err)
					}
				}
				d, err := e.Dup(ctx)
				if err != nil {
					return err
				}
				s, err := e.Split(ctx, e.Rank()%2, e.Rank())
				if err != nil {
					return err
				}
				for _, c := range []*endpoint.Comm{d, s, e} {
					if err := c.Barrier(ctx); err != nil {
						return err
					}
					all, err := c.Allgather(ctx, []byte{byte(c.Rank())})
					if err != nil {
						return err
					}
					for r, b := range all {
						if len(b) != 1 || int(b[0]) != r {
							return fmt.Errorf("allgather on derived endpoint comm: %v", all)
						}
					}
				}
				// endpoints of an endpoints communicator: one each
				sub, err := e.CreateEndpoints(ctx, 1)
				if err != nil {
					return err
				}
				var errs []error
				if sub[0].Size() != e.Size() || sub[0].Rank() != e.Rank() {
					errs = append(errs, fmt.Errorf("nested endpoints: rank %d of %d, want %d of %d", sub[0].Rank(), sub[0].Size(), e.Rank(), e.Size()))
				}
				if err := sub[0].Barrier(ctx); err != nil {
					errs = append(errs, err)
				}
				sub[0].Free()
				d.Free()
				s.Free()
				e.Free()
				return errors.Join(errs...)
			})
			for _, c := range []*endpoint.Comm{dup, sp} {
				if err := c.Free(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestPeerDeath: rank 1's process exits without sending; rank 0's Wait must return
// an error within its timeout instead of hanging.
func TestPeerDeath(t *testing.T) {
	for _, p := range providers {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 2, p, 60*time.Second, endpoint.EnvTimeout+"=2s") {
				return
			}
			ctx := eptest.Ctx(t, 30*time.Second)
			w, err := endpoint.Init(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close() // finalizes: a rank that leaves without it fails the job
			c := w.Comm()
			if err := c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			if c.Rank() == 1 {
				// Goes away mid-run without sending anything: its endpoint is
				// closed (so no stale /dev/shm region is left behind) and the
				// process exits while rank 0 still waits.
				w.Close()
				return
			}
			r, err := c.Irecv(make([]byte, 8), 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			const limit = 2 * time.Second
			wctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			start := time.Now()
			_, err = r.Wait(wctx)
			took := time.Since(start)
			if err == nil {
				t.Fatal("Wait on a dead peer succeeded")
			}
			if took > limit+time.Second {
				t.Fatalf("Wait took %v with a %v timeout", took, limit)
			}
			t.Logf("Wait returned after %v: %v", took, err)
			r.Cancel()
			// A rendezvous send whose receiver is gone never gets its FIN (on
			// tcp;ofi_rxm the header cannot even be sent: Isend gives up after
			// WEFT_ENDPOINT_TIMEOUT).
			start = time.Now()
			// (Larger than a pair's copy area, nodecopy.go, which an
			// Isend of a smaller message could fill and complete.)
			sr, err := c.Isend(make([]byte, 4<<20), 1, 2)
			if err == nil {
				sctx, scancel := context.WithTimeout(context.Background(), limit)
				defer scancel()
				_, err = sr.Wait(sctx)
			}
			if err == nil || time.Since(start) > 2*limit+time.Second {
				t.Fatalf("rendezvous send to a dead peer: %v after %v", err, time.Since(start))
			}
			t.Logf("rendezvous send gave up after %v: %v", time.Since(start), err)
		})
	}
}

// TestPeerExitUnblocks: rank 1 goes away without finalising — it exits
// (os.Exit without World.Close) or is killed (SIGKILL) — while rank 0 is
// blocked on it: in Recv, in the Wait of a rendezvous send it never
// receives, in WaitAll, in Probe. Rank 0's operation must fail with
// ErrPeerGone well within its context's 60 s (and the endpoint timeout),
// not spin until then. The ranks run unsupervised (launchtest.RunMayDie),
// as under a launcher that does not end the job when a rank leaves.
// Under the race detector a killed rank is tested once (Recv, node
// transport).
func TestPeerExitUnblocks(t *testing.T) {
	type blocked func(ctx context.Context, c *endpoint.Comm) error
	ops := []struct {
		name  string
		provs []string
		op    blocked
	}{
		{"recv", providers, func(ctx context.Context, c *endpoint.Comm) error {
			_, err := c.Recv(ctx, make([]byte, 8), 1, 7)
			return err
		}},
		{"rdv-send", []string{"native", "shm"}, func(ctx context.Context, c *endpoint.Comm) error {
			// Larger than a pair's copy area (nodecopy.go): the send
			// needs the receiver whatever the protocol.
			return c.Send(ctx, make([]byte, 4<<20), 1, 7)
		}},
		{"waitall", []string{"native", "shm"}, func(ctx context.Context, c *endpoint.Comm) error {
			r, err := c.Irecv(make([]byte, 8), 1, 7)
			if err != nil {
				return err
			}
			return endpoint.WaitAll(ctx, r)
		}},
		{"probe", []string{"native", "shm"}, func(ctx context.Context, c *endpoint.Comm) error {
			_, err := c.Probe(ctx, 1, 7)
			return err
		}},
	}
	for _, how := range []string{"exit", "kill"} {
		for _, o := range ops {
			for _, p := range o.provs {
				if testenv.Race && how == "kill" && (o.name != "recv" || p != "native") {
					continue // a killed peer is seen as an exited one; the race detector looks at that once
				}
				t.Run(how+"/"+o.name+"/"+provName(p), func(t *testing.T) {
					if !launchtest.IsWorker() {
						skipRepeatPass(t)
						prov, env := provEnv(p, []string{endpoint.EnvTimeout + "=60s"})
						launchtest.RunMayDie(t, 2, prov, 60*time.Second, []int{1}, env...)
						return
					}
					ctx := eptest.Ctx(t, 60*time.Second)
					w, err := endpoint.Init(ctx)
					if err != nil {
						t.Fatal(err)
					}
					c := w.Comm()
					if err := c.Barrier(ctx); err != nil {
						t.Fatal(err)
					}
					if c.Rank() == 1 {
						// Leave once rank 0 says it is about to block.
						if _, err := c.Recv(ctx, make([]byte, 1), 0, 1); err != nil {
							t.Fatal(err)
						}
						if how == "kill" {
							_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
							select {}
						}
						os.Exit(0)
					}
					defer w.Close()
					if err := c.Send(ctx, []byte{1}, 1, 1); err != nil {
						t.Fatal(err)
					}
					start := time.Now()
					err = o.op(ctx, c)
					took := time.Since(start)
					if !errors.Is(err, endpoint.ErrPeerGone) {
						t.Fatalf("%s blocked on a rank that went away: %v after %v, want ErrPeerGone", o.name, err, took)
					}
					if took > 20*time.Second {
						t.Fatalf("%s took %v to see that rank 1 went away", o.name, took)
					}
					t.Logf("%s returned after %v: %v", o.name, took, err)
				})
			}
		}
	}
}

// TestRendezvousNoAllocs: a ping-pong of blocking 64 KiB Send and Recv
// between two processes allocates nothing per message once warm over the
// node transport, by either of its two ways for large messages, and over
// libfabric's shm (the requests, their headers and registration handles
// are reused): a growing heap's fresh pages cost their first touch, which
// on a virtual machine stalled sends for tens of microseconds.
func TestRendezvousNoAllocs(t *testing.T) {
	for _, tc := range []struct {
		name, provider, env string
		most                float64 // allocations per round trip and process
	}{
		{"single", "native", "WEFT_TUNE=nodeway=single", 0},
		{"pipe", "native", "WEFT_TUNE=nodeway=pipe", 0},
		{"shm", "shm", "WEFT_TUNE=", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if launch(t, 2, tc.provider, 60*time.Second, tc.env) {
				return
			}
			w := initWorld(t)
			c := w.Comm()
			ctx := eptest.Ctx(t, 40*time.Second)
			me, peer := c.Rank(), 1-c.Rank()
			out, in := make([]byte, 64<<10), make([]byte, 64<<10)
			pattern(out, me, peer, 0)
			var ferr error
			round := func() {
				for turn := 0; turn < 2; turn++ {
					if turn == me {
						if err := c.Send(ctx, out, peer, 5); err != nil {
							ferr = err
						}
					} else if st, err := c.Recv(ctx, in, peer, 5); err != nil || st.Count != len(in) {
						ferr = fmt.Errorf("recv: %v, status %+v", err, st)
					}
				}
			}
			for range 50 {
				round()
			}
			allocs := testing.AllocsPerRun(200, round)
			if ferr != nil {
				t.Fatal(ferr)
			}
			want := make([]byte, len(in))
			pattern(want, peer, me, 0)
			if !bytes.Equal(in, want) {
				t.Fatal("the last message arrived corrupted")
			}
			if allocs > tc.most {
				t.Errorf("%s: %.2f allocations per round trip of 64 KiB messages, want at most %v", tc.name, allocs, tc.most)
			}
			if err := c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
