package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/nodeseg"
	"github.com/weft-hpc/weft/internal/settings"
	"github.com/weft-hpc/weft/job"
)

// wantTransport is the transport every peer of a one-node job should use
// in this worker.
func wantTransport() string {
	if os.Getenv(endpoint.EnvNodeTransport) == "fabric" {
		return endpoint.TransportFabric
	}
	return endpoint.TransportNode
}

func checkTransports(t *testing.T, c *endpoint.Comm, want func(r int) string) {
	t.Helper()
	for r := 0; r < c.Size(); r++ {
		got, err := c.Transport(r)
		if err != nil {
			t.Fatal(err)
		}
		if w := want(r); got != w {
			t.Fatalf("rank %d reaches rank %d through %s, want %s", c.Rank(), r, got, w)
		}
	}
	if _, err := c.Transport(c.Size()); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("Transport of rank %d: %v", c.Size(), err)
	}
}

// ownSegments lists the node segment files of this process in the shm
// directory.
func ownSegments(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(nodeseg.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if nodeseg.Owned(e.Name(), os.Getpid()) {
			out = append(out, filepath.Join(nodeseg.Dir(), e.Name()))
		}
	}
	return out
}

// TestNodeThresholds: every endpoint (2 processes × 2 endpoints: peers in
// the same process and in the other one) sends to every other one
// messages around each size where the node transport changes protocol
// (first cell, second cell, ring inline limit, medium slot limit, eager
// limit, the pipelined copy's smallest message when it is on), content
// checked; then receives of one byte less than the message report
// truncation with the right count. The peers use the node transport
// (native) or libfabric (shm, tcp), and say so.
func TestNodeThresholds(t *testing.T) {
	tu, err := settings.Tune()
	if err != nil {
		t.Fatal(err)
	}
	inline := int(tu.NodeInline)
	eager := 16 << 10
	sizes := []int{0, 1, 39, 40, 41, 96, 97, inline - 1, inline, inline + 1, 4096, eager - 1, eager, eager + 1, 3<<20 + 5}
	if med := (int(tu.NodeMedium) + 63) &^ 63; med != eager && med > inline {
		sizes = append(sizes, med-1, med, med+1) // the medium slot limit
	}
	if slot, cp := (int(tu.NodeCopySlot)+63)&^63, int(tu.NodeCopy); cp > 0 {
		// the pipelined copy's smallest message and rounds of its slots
		sizes = append(sizes, cp-1, cp, cp+1, max(cp, 4*slot+1))
	}
	for _, p := range providers {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 2, p, 90*time.Second) {
				return
			}
			w := initWorld(t)
			ctx := eptest.Ctx(t, 60*time.Second)
			checkTransports(t, w.Comm(), func(int) string { return wantTransport() })
			eps, err := w.Comm().CreateEndpoints(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range eps {
				checkTransports(t, e, func(int) string { return wantTransport() })
			}
			allPairs(t, eps, sizes)
			runHandles(t, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
				me, n := c.Rank(), c.Size()
				to, from := (me+1)%n, (me+n-1)%n
				for i, sz := range sizes[1:] {
					msg := make([]byte, sz)
					pattern(msg, me, to, i)
					s, err := c.Isend(msg, to, i)
					if err != nil {
						return err
					}
					buf := make([]byte, sz-1)
					st, rerr := c.Recv(ctx, buf, from, i)
					if !errors.Is(rerr, endpoint.ErrTruncated) || st.Count != sz-1 || st.Source != from {
						return fmt.Errorf("%d bytes into %d: status %+v, err %v", sz, sz-1, st, rerr)
					}
					want := make([]byte, sz)
					pattern(want, from, me, i)
					if !bytes.Equal(buf, want[:sz-1]) {
						return fmt.Errorf("%d bytes into %d: wrong data", sz, sz-1)
					}
					if _, err := s.Wait(ctx); err != nil {
						return fmt.Errorf("truncated send of %d bytes: %w", sz, err)
					}
				}
				return c.Barrier(ctx)
			})
			for _, e := range eps {
				if err := e.Free(); err != nil {
					t.Error(err)
				}
			}
			// Every peer has mapped this process's segments by now: none
			// is left in the directory.
			if err := w.Comm().Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			if err := w.Comm().Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			if left := ownSegments(t); len(left) > 0 {
				t.Fatalf("segment files still linked after set-up: %v", left)
			}
		})
	}
}

// TestMixedTransports: one communicator whose peers are reached three
// ways. Four processes pretend to be two nodes (WEFT_NODE_ID), ranks 0-1
// on one and 2-3 on the other, over tcp;ofi_rxm; each creates 2
// endpoints. Every endpoint then has a peer in its own process and one
// in the other process of its node (node transport) and four on the other
// node (libfabric). Endpoint 0 receives everything with AnySource (half
// with AnyTag): each sender's messages, of sizes in every protocol, must
// arrive complete and in the order they were sent.
func TestMixedTransports(t *testing.T) {
	if !launchtest.IsWorker() {
		skipRepeatPass(t)
		launchtest.Run(t, 4, "tcp;ofi_rxm", 90*time.Second, endpoint.EnvNodeTransport+"=native")
		return
	}
	ctx := eptest.Ctx(t, 60*time.Second)
	j, err := job.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Finalize()
	node := j.Rank() / 2
	t.Setenv("WEFT_NODE_ID", "pretend-node-"+strconv.Itoa(node))
	w, err := endpoint.Init(ctx, endpoint.WithJob(j))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if lr, ls := w.Comm().NodeLocal(); ls != 2 || lr != j.Rank()%2 {
		t.Fatalf("NodeLocal = %d, %d; want %d, 2", lr, ls, j.Rank()%2)
	}
	eps, err := w.Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	onNode := func(r int) string { // endpoint rank r belongs to world rank r/2
		if r/4 == node {
			return endpoint.TransportNode
		}
		return endpoint.TransportFabric
	}
	for _, e := range eps {
		checkTransports(t, e, onNode)
	}
	sizes := []int{8, 1500, 6000, 40000}
	const per = 24
	runHandles(t, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
		me, n := c.Rank(), c.Size()
		if me != 0 {
			var reqs []*endpoint.Request
			for k := 0; k < per; k++ {
				b := make([]byte, sizes[k%len(sizes)])
				pattern(b, me, 0, k)
				r, err := c.Isend(b, 0, k)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
			return endpoint.WaitAll(ctx, reqs...)
		}
		next := make([]int, n) // next message index expected per source
		buf := make([]byte, 64<<10)
		rr := 0
		for got := 0; got < (n-1)*per; got++ {
			src, tag := endpoint.AnySource, endpoint.AnyTag
			if got%2 == 1 { // every other receive names its source and tag
				for rr = rr%(n-1) + 1; next[rr] == per; rr = rr%(n-1) + 1 {
				}
				src, tag = rr, next[rr]
			}
			st, err := c.Recv(ctx, buf, src, tag)
			if err != nil {
				return err
			}
			k := next[st.Source]
			if st.Tag != k || st.Count != sizes[k%len(sizes)] {
				return fmt.Errorf("from rank %d: tag %d, %d bytes; want message %d of %d bytes (order broken)", st.Source, st.Tag, st.Count, k, sizes[k%len(sizes)])
			}
			want := make([]byte, st.Count)
			pattern(want, st.Source, 0, k)
			if !bytes.Equal(buf[:st.Count], want) {
				return fmt.Errorf("message %d from rank %d corrupted", k, st.Source)
			}
			next[st.Source]++
		}
		return nil
	})
	for _, e := range eps {
		if err := e.Free(); err != nil {
			t.Error(err)
		}
	}
}

// TestNodeSenderGone: a sender posts a large (rendezvous) message to a
// peer on its node and is killed before the peer receives it. The
// receive, which would copy straight out of the dead process, fails with
// ErrPeerGone; it neither hangs nor delivers garbage. The send's header
// and a small message sent after it were complete in the ring before the
// kill: the small one is still delivered.
func TestNodeSenderGone(t *testing.T) {
	if !launchtest.IsWorker() {
		skipRepeatPass(t)
		prov, env := provEnv("native", nil)
		launchtest.RunMayDie(t, 2, prov, 60*time.Second, []int{1}, env...)
		return
	}
	ctx := eptest.Ctx(t, 45*time.Second)
	w, err := endpoint.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := w.Comm()
	if tr, _ := c.Transport(1 - c.Rank()); tr != endpoint.TransportNode {
		t.Fatalf("peer reached through %s", tr)
	}
	const big = 8 << 20
	if c.Rank() == 1 {
		msg := make([]byte, big)
		if _, err := c.Isend(msg, 0, 1); err != nil {
			t.Fatal(err)
		}
		if err := c.Send(ctx, []byte(strconv.Itoa(os.Getpid())), 0, 2); err != nil {
			t.Fatal(err)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	defer w.Close()
	small := make([]byte, 16)
	st, err := c.Recv(ctx, small, 1, 2)
	pid, perr := strconv.Atoi(string(small[:st.Count]))
	if err != nil || perr != nil {
		t.Fatalf("small message: %q, %v", small[:st.Count], err)
	}
	// Wait for the sender's process to be gone (a zombie has no memory
	// left to copy from either).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || bytes.Contains(b, []byte(") Z ")) || bytes.Contains(b, []byte(") X ")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sender never went away")
		}
	}
	buf := make([]byte, big)
	for i := range buf {
		buf[i] = 0xee
	}
	start := time.Now()
	st, err = c.Recv(ctx, buf, 1, 1)
	if !errors.Is(err, endpoint.ErrPeerGone) {
		t.Fatalf("receive from a dead sender: status %+v, err %v; want ErrPeerGone", st, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("receive from a dead sender took %v", took)
	}
}

// TestFabricOnDemand: a one-node job on the node transport never opens
// libfabric (its start-up pays no provider discovery); Comm.Domain and
// Info open it when asked, and endpoints created after only one rank did
// still pair. With the node transport off it is open from Init.
func TestFabricOnDemand(t *testing.T) {
	for _, p := range []string{"native", "shm"} {
		t.Run(p, func(t *testing.T) {
			if launch(t, 2, p, 60*time.Second) {
				return
			}
			w := initWorld(t)
			ctx := eptest.Ctx(t, 30*time.Second)
			native := os.Getenv(endpoint.EnvNodeTransport) != "fabric"
			if got := endpoint.FabricOpen(w); got == native {
				t.Fatalf("libfabric open after Init: %v (node transport %v)", got, native)
			}
			eps, err := w.Comm().CreateEndpoints(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			allPairs(t, eps, []int{8, 20000, 100000})
			if got := endpoint.FabricOpen(w); got == native {
				t.Fatalf("libfabric open after CreateEndpoints and traffic: %v", got)
			}
			if native {
				// Rank 0 alone opens libfabric: endpoints created then
				// (rank 0's with libfabric names, rank 1's without) still
				// pair over the node transport.
				if w.Comm().Rank() == 0 && w.Info() == nil {
					t.Fatal("Info did not open libfabric on demand")
				}
				more, err := w.Comm().CreateEndpoints(ctx, 1)
				if err != nil {
					t.Fatalf("CreateEndpoints after one rank opened libfabric: %v", err)
				}
				allPairs(t, more, []int{8, 100000})
				if err := more[0].Free(); err != nil {
					t.Fatal(err)
				}
			}
			if eps[0].Domain() == nil || eps[0].Info() == nil || w.Comm().Domain() == nil || w.Info() == nil {
				t.Fatal("Domain/Info did not open libfabric on demand")
			}
			if !endpoint.FabricOpen(w) {
				t.Fatal("libfabric still closed after Domain")
			}
			if eps[0].Domain() == eps[1].Domain() {
				t.Fatal("two private endpoints got one domain")
			}
			for _, e := range eps {
				if err := e.Free(); err != nil {
					t.Error(err)
				}
			}
			if err := w.Comm().Barrier(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFreedContextDropsMessages: a message sent on a communicator that is
// freed before anyone receives it never matches a receive of a later
// communicator, whether it had arrived before the Free (dropped by it)
// or arrives after (dropped on arrival while the id is quarantined); the
// freed id is not given to the next endpoint.ContextQuarantine
// communicators and then is, with nothing of the old one queued.
func TestFreedContextDropsMessages(t *testing.T) {
	for _, p := range []string{"native", "shm"} {
		for _, late := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/late=%v", p, late), func(t *testing.T) {
				if launch(t, 2, p, 60*time.Second) {
					return
				}
				w := initWorld(t)
				ctx := eptest.Ctx(t, 30*time.Second)
				world := w.Comm()
				d, err := world.Dup(ctx)
				if err != nil {
					t.Fatal(err)
				}
				id := d.ContextID()
				if world.Rank() == 1 {
					if late { // rank 0 has freed d
						if _, err := world.Recv(ctx, nil, 0, 6); err != nil {
							t.Fatal(err)
						}
					}
					if err := d.Send(ctx, []byte("stale"), 0, 5); err != nil {
						t.Fatal(err)
					}
				} else if !late {
					for { // the message has arrived (unexpected) on rank 0
						ok, _, err := d.Iprobe(1, 5)
						if err != nil {
							t.Fatal(err)
						}
						if ok {
							break
						}
					}
				}
				if err := d.Free(); err != nil {
					t.Fatal(err)
				}
				if late && world.Rank() == 0 {
					if err := world.Send(ctx, nil, 1, 6); err != nil {
						t.Fatal(err)
					}
				}
				// Rank 1's barrier message follows its stale one, which
				// rank 0 has received before it leaves the barrier.
				if err := world.Barrier(ctx); err != nil {
					t.Fatal(err)
				}
				for i := 0; ; i++ {
					d2, err := world.Dup(ctx)
					if err != nil {
						t.Fatal(err)
					}
					reused := d2.ContextID() == id
					if reused != (i == endpoint.ContextQuarantine) {
						t.Fatalf("after %d more communicators the freed id %d is given again: %v (quarantine %d)", i, id, reused, endpoint.ContextQuarantine)
					}
					if ok, st, err := d2.Iprobe(endpoint.AnySource, endpoint.AnyTag); err != nil || ok {
						t.Fatalf("a message of the freed communicator matched on communicator %d of context %d: %v %+v %v", i, d2.ContextID(), ok, st, err)
					}
					if err := d2.Free(); err != nil {
						t.Fatal(err)
					}
					if reused {
						break
					}
				}
				if err := world.Barrier(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
