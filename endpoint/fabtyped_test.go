package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// flay is a layout of float64s: blocks of blk every stride elements.
type flay struct {
	name        string
	blk, stride int
}

// typ returns the type holding nf float64s in l (nf a multiple of blk)
// and the bytes of buffer it spans.
func (l flay) typ(nf int) (*ddt.Type, int, error) {
	t, err := committed(ddt.Vector(nf/l.blk, l.blk, l.stride, ddt.Float64))
	if err != nil {
		return nil, 0, err
	}
	return t, 8 * ((nf/l.blk-1)*l.stride + l.blk), nil
}

// fill writes value base+i into element i of nf float64s laid out as l.
func (l flay) fill(buf []byte, nf int, base float64) {
	for i := 0; i < nf; i++ {
		j := i/l.blk*l.stride + i%l.blk
		putF64s(buf[8*j:8*j+8], func(int) float64 { return base + float64(i) })
	}
}

// check verifies element i of the first nf is base+i.
func (l flay) check(buf []byte, nf int, base float64) error {
	for i := 0; i < nf; i++ {
		j := i/l.blk*l.stride + i%l.blk
		if x := f64s(buf[8*j : 8*j+8])[0]; x != base+float64(i) {
			return fmt.Errorf("%s element %d = %v, want %v", l.name, i, x, base+float64(i))
		}
	}
	return nil
}

var (
	laySmall  = flay{"8B-blocks", 1, 3}       // the segment pipeline
	laySmall2 = flay{"16B-blocks", 2, 5}      // another small layout
	layMid    = flay{"512B-blocks", 64, 70}   // below zcblock (set to 1 KiB): pipeline
	layLarge  = flay{"2KiB-blocks", 256, 300} // zero copy with zcblock=1K
	layLarge2 = flay{"4KiB-blocks", 512, 515}
)

// fabTypedPairs are the (sender, receiver) layouts of fabTypedExchange.
var fabTypedPairs = [][2]flay{{laySmall, layLarge}, {layLarge, laySmall2}, {layLarge, layLarge2}, {laySmall, laySmall2}, {layMid, layLarge}}

// fabTypedSizes are float64 counts around every threshold (multiples of
// 512): tcp's inject size, shm's, the eager limit, one segment, the
// segment ring (8 segments of 16 KiB) and past it.
var fabTypedSizes = []int{512, 1536, 2048, 2560, 20480}

// fabTypedSend sends, for each pair and size, five messages: typed (tags
// 1, 2, 4, 5) and contiguous (tag 3).
func fabTypedSend(ctx context.Context, c *endpoint.Comm, to int) error {
	for pi, p := range fabTypedPairs {
		for _, nf := range fabTypedSizes {
			a := p[0]
			ta, na, err := a.typ(nf)
			if err != nil {
				return err
			}
			src := make([]byte, na)
			base := float64(pi*1000000 + nf)
			a.fill(src, nf, base)
			contig := make([]byte, 8*nf)
			putF64s(contig, func(i int) float64 { return base + float64(i) })
			for tag := 1; tag <= 5; tag++ {
				if tag == 3 {
					err = c.SendTyped(ctx, contig, nf, ddt.Float64, to, tag)
				} else {
					err = c.SendTyped(ctx, src, 1, ta, to, tag)
				}
				if err != nil {
					return fmt.Errorf("%s→%s %d floats tag %d: send: %w", a.name, p[1].name, nf, tag, err)
				}
			}
		}
	}
	return nil
}

// fabTypedRecv receives fabTypedSend's messages: typed into contiguous,
// typed into another layout, contiguous into a layout, into one block
// fewer (truncation) and into more elements than sent.
func fabTypedRecv(ctx context.Context, c *endpoint.Comm, from int) error {
	for pi, p := range fabTypedPairs {
		for _, nf := range fabTypedSizes {
			b := p[1]
			base := float64(pi*1000000 + nf)
			what := func(tag int) string { return fmt.Sprintf("%s→%s %d floats tag %d", p[0].name, b.name, nf, tag) }
			contig := make([]byte, 8*nf)
			if st, err := c.RecvTyped(ctx, contig, nf, ddt.Float64, from, 1); err != nil || st.Count != 8*nf {
				return fmt.Errorf("%s: %+v %w", what(1), st, err)
			}
			if err := (flay{"contiguous", 1, 1}).check(contig, nf, base); err != nil {
				return fmt.Errorf("%s: %w", what(1), err)
			}
			tb, nb, err := b.typ(nf)
			if err != nil {
				return err
			}
			for _, tag := range []int{2, 3} {
				dst := make([]byte, nb)
				if st, err := c.RecvTyped(ctx, dst, 1, tb, from, tag); err != nil || st.Count != 8*nf {
					return fmt.Errorf("%s: %+v %w", what(tag), st, err)
				}
				if err := b.check(dst, nf, base); err != nil {
					return fmt.Errorf("%s: %w", what(tag), err)
				}
			}
			short, ts, cnt, ns := nf-b.blk, tb, 0, 0
			if short > 0 {
				if ts, ns, err = b.typ(short); err != nil {
					return err
				}
				cnt = 1
			} else {
				short = 0
			}
			dst := make([]byte, ns)
			st, err := c.RecvTyped(ctx, dst, cnt, ts, from, 4)
			if !errors.Is(err, endpoint.ErrTruncated) || st.Count != 8*short {
				return fmt.Errorf("%s: %+v %v, want ErrTruncated after %d bytes", what(4), st, err, 8*short)
			}
			if err := b.check(dst, short, base); err != nil {
				return fmt.Errorf("%s (truncated): %w", what(4), err)
			}
			tl, nl, err := b.typ(nf + 4*b.blk)
			if err != nil {
				return err
			}
			dst = make([]byte, nl)
			if st, err := c.RecvTyped(ctx, dst, 1, tl, from, 5); err != nil || st.Count != 8*nf {
				return fmt.Errorf("%s: %+v %w", what(5), st, err)
			}
			if err := b.check(dst, nf, base); err != nil {
				return fmt.Errorf("%s: %w", what(5), err)
			}
		}
	}
	return nil
}

// typedPathVariants are the runs of TestFabricTypedPaths: provider (an
// entry of withHdr), JIT, processes, and whether -short runs it. Each
// provider runs with the match word in CQ data and in a header, each
// with both JIT settings, at 2 and 4 processes, in few enough runs to
// keep make test's time.
var typedPathVariants = []struct {
	p, jit string
	n      int
	short  bool
}{
	{"shm", "off", 2, false},
	{"shm", "on", 4, false},
	{"tcp;ofi_rxm", "off", 2, true},
	{"shm+hdr", "on", 4, true},
	{"tcp;ofi_rxm+hdr", "on", 2, false},
}

// TestFabricTypedPaths: typed messages to libfabric peers in every
// regime (inject, eager from a segment buffer, packed whole, segment
// pipeline, zero copy by iovec reads; receives into blocks and into a
// buffer then unpacked), typed→contiguous, contiguous→typed and typed→typed, with
// truncation and short messages, between 2 and 4 processes × 2
// endpoints, on shm and tcp;ofi_rxm, with the match word in CQ data and
// in a match header, interpreter and JIT; byte for byte. Each process
// checks that every path was taken.
func TestFabricTypedPaths(t *testing.T) {
	for _, vr := range typedPathVariants {
		if testing.Short() && !vr.short {
			continue
		}
		t.Run(fmt.Sprintf("%s/jit-%s/np%d", provName(vr.p), vr.jit, vr.n), func(t *testing.T) {
			// zcblock lowered to 1 KiB so that blocks of 2 and 4 KiB go by
			// zero copy, and pipemin to 64 KiB so that smaller blocks go
			// packed whole up to 20 KiB and by the pipeline from 160 KiB.
			p, hdr := strings.CutSuffix(vr.p, hdrSuffix)
			tune := "WEFT_TUNE=zcblock=1K,pipemin=64K"
			if hdr {
				tune += ",epmatchhdr=1"
			}
			if launch(t, vr.n, p, 120*time.Second, "WEFT_JIT="+vr.jit, tune) {
				return
			}
			w := initWorld(t)
			if endpoint.MatchHeader(w) != hdr {
				t.Fatalf("match header %v, want %v", endpoint.MatchHeader(w), hdr)
			}
			ctx := eptest.Ctx(t, 100*time.Second)
			eps, err := w.Comm().CreateEndpoints(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			runHandles(t, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
				me, n := c.Rank(), c.Size()
				to, from := (me+1)%n, (me+n-1)%n
				if err := inTurn(me, func() error { return fabTypedSend(ctx, c, to) },
					func() error { return fabTypedRecv(ctx, c, from) }); err != nil {
					return err
				}
				return c.Barrier(ctx)
			})
			got := endpoint.TypedPaths()
			for i, name := range []string{"eager from a segment buffer", "zero copy", "pipeline", "rendezvous read into blocks", "rendezvous read then unpacked", "packed whole"} {
				if got[i] == 0 {
					t.Errorf("no typed message took the path %q: %v", name, got)
				}
			}
		})
	}
}

// TestFabricPipelinePeerDies: the sender of a pipelined typed message is
// killed in the middle of it; the receiver gets ErrPeerGone within its
// timeout, not a hang.
func TestFabricPipelinePeerDies(t *testing.T) {
	for _, p := range []string{"shm", "tcp;ofi_rxm"} {
		if testing.Short() && p != "shm" {
			continue
		}
		t.Run(provName(p), func(t *testing.T) {
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
			const nf = 4 << 20 // 32 MiB of 8-byte blocks
			typ, nb, err := laySmall.typ(nf)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, nb)
			if c.Rank() == 1 {
				if _, err := c.Recv(ctx, make([]byte, 1), 0, 1); err != nil {
					t.Fatal(err)
				}
				r, err := c.IsendTyped(buf, 1, typ, 0, 2)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 40; i++ { // a few segments go out
					if done, _, err := r.Test(); done || err != nil {
						t.Fatalf("pipelined send of 32 MiB complete after %d tests: %v", i, err)
					}
					time.Sleep(time.Millisecond)
				}
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			defer w.Close()
			rr, err := c.IrecvTyped(buf, 1, typ, 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Send(ctx, []byte{1}, 1, 1); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = rr.Wait(ctx)
			took := time.Since(start)
			if !errors.Is(err, endpoint.ErrPeerGone) || took > 20*time.Second {
				t.Fatalf("receive of a pipelined message whose sender died: %v after %v, want ErrPeerGone", err, took)
			}
			t.Logf("receive returned after %v: %v", took, err)
		})
	}
}

// TestFabricSignatureMismatch: a receive whose type signature MPI would
// reject (int32 data taken as float32, struct fields of other types)
// fails with ErrInvalid on every path — libfabric's eager, plain
// rendezvous, pipeline and zero copy; the node transport's inline,
// staged and gathered messages — and for messages of several parts; the
// sender completes; legal receives (fewer elements than posted, a column
// into a row, untyped bytes, parts split otherwise) still work, and so
// does the next message.
func TestFabricSignatureMismatch(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprintf("node-transport-%v", native), func(t *testing.T) {
			signatureMismatch(t, native, false)
		})
	}
	// Every segment buffer of the sender in use: eager typed messages go
	// from buffers of their own, with their signatures.
	t.Run("segments-busy", func(t *testing.T) { signatureMismatch(t, false, true) })
}

func signatureMismatch(t *testing.T, native, segsBusy bool) {
	a, b, ctx := singletonPair(t, endpoint.WithNodeTransport(native))
	if segsBusy {
		t.Cleanup(endpoint.HoldSegments(a))
	}
	endpoint.SetTypedPath("", 1024) // blocks of 4000 bytes go by zero copy
	defer endpoint.SetTypedPath("", 0)
	vec := func(n, blk, stride int, old *ddt.Type) *ddt.Type {
		ty, err := committed(ddt.Vector(n/blk, blk, stride, old))
		if err != nil {
			t.Fatal(err)
		}
		return ty
	}
	pair, err := committed(ddt.Struct([]int{1, 1}, []int64{0, 8}, []*ddt.Type{ddt.Int32, ddt.Float64}))
	if err != nil {
		t.Fatal(err)
	}
	swapped, err := committed(ddt.Struct([]int{1, 1}, []int64{0, 8}, []*ddt.Type{ddt.Float64, ddt.Int32}))
	if err != nil {
		t.Fatal(err)
	}
	type side struct {
		count int
		t     *ddt.Type
		span  int // buffer bytes
	}
	cases := []struct {
		name     string
		send     side
		recv     side
		mismatch bool
	}{
		{"eager int32→float32", side{100, ddt.Int32, 400}, side{100, ddt.Float32, 400}, true},
		{"rendezvous int32→float32", side{100000, ddt.Int32, 400000}, side{100000, ddt.Float32, 400000}, true},
		{"eager strided int32→float32", side{1, vec(200, 1, 2, ddt.Int32), 1600}, side{200, ddt.Float32, 800}, true},
		{"staged strided int32→float32", side{1, vec(3000, 1, 2, ddt.Int32), 24000}, side{3000, ddt.Float32, 12000}, true},
		{"packed whole int32→float32", side{1, vec(100000, 1, 2, ddt.Int32), 800000}, side{100000, ddt.Float32, 400000}, true},
		{"pipeline int32→float32", side{1, vec(100000, 1, 2, ddt.Int32), 800000}, side{100000, ddt.Float32, 400000}, true},
		{"zero copy int32→float32", side{1, vec(100000, 1000, 1100, ddt.Int32), 440000}, side{1, vec(100000, 1000, 1200, ddt.Float32), 480000}, true},
		{"struct fields swapped", side{10, pair, 160}, side{10, swapped, 160}, true},
		{"fewer elements than posted", side{50, ddt.Int32, 200}, side{100, ddt.Int32, 400}, false},
		{"column into row", side{1, vec(30000, 1, 3, ddt.Float64), 720000}, side{30000, ddt.Float64, 240000}, false},
		{"bytes into float32", side{400, ddt.Byte, 400}, side{100, ddt.Float32, 400}, false},
		{"rendezvous after a mismatch", side{100000, ddt.Int32, 400000}, side{100000, ddt.Int32, 400000}, false},
	}
	for i, c := range cases {
		if segsBusy && int64(c.send.count)*c.send.t.Size() > 16<<10-64 {
			continue // beyond the eager limit: a pipeline needs the segments
		}
		if strings.HasPrefix(c.name, "pipeline") { // (shm packs such a message whole)
			endpoint.SetTypedPath("pipeline", 1024)
		} else {
			endpoint.SetTypedPath("", 1024)
		}
		sbuf := make([]byte, c.send.span)
		for j := range sbuf {
			sbuf[j] = byte(j*7 + i)
		}
		errc := make(chan error, 1)
		go func() { errc <- a.SendTyped(ctx, sbuf, c.send.count, c.send.t, 1, i) }()
		rbuf := make([]byte, c.recv.span)
		_, rerr := b.RecvTyped(ctx, rbuf, c.recv.count, c.recv.t, 0, i)
		if serr := <-errc; serr != nil {
			t.Fatalf("%s: send: %v", c.name, serr)
		}
		if c.mismatch != errors.Is(rerr, endpoint.ErrInvalid) || !c.mismatch && rerr != nil {
			t.Fatalf("%s: receive error %v, want mismatch %v", c.name, rerr, c.mismatch)
		}
	}
	if segsBusy {
		return
	}
	// Messages of several parts: the parts' signatures in order.
	part := func(n int, ty *ddt.Type) endpoint.Part {
		return endpoint.Part{Buf: make([]byte, n*int(ty.Size())), Count: n, Type: ty}
	}
	for _, n := range []int{10, 30000} { // eager and rendezvous
		parts := []struct {
			name     string
			send     []endpoint.Part
			recv     []endpoint.Part
			mismatch bool
		}{
			{"parts float64,int32 → float64,float32", []endpoint.Part{part(n, ddt.Float64), part(n, ddt.Int32)},
				[]endpoint.Part{part(n, ddt.Float64), part(n, ddt.Float32)}, true},
			{"parts float64,int32 → float64 split in two,int32", []endpoint.Part{part(n, ddt.Float64), part(n, ddt.Int32)},
				[]endpoint.Part{part(n/2, ddt.Float64), part(n-n/2, ddt.Float64), part(2*n, ddt.Int32)}, false},
			{"parts float64,int32 → float64,bytes", []endpoint.Part{part(n, ddt.Float64), part(n, ddt.Int32)},
				[]endpoint.Part{part(n, ddt.Float64), part(4*n, ddt.Byte)}, false},
			{"parts int32,float64 → float64,int32", []endpoint.Part{part(n, ddt.Int32), part(n, ddt.Float64)},
				[]endpoint.Part{part(n, ddt.Float64), part(n, ddt.Int32)}, true},
		}
		for i, c := range parts {
			tag := 100 + i
			errc := make(chan error, 1)
			go func() { errc <- a.SendParts(ctx, c.send, 1, tag) }()
			_, rerr := b.RecvParts(ctx, c.recv, 0, tag)
			if serr := <-errc; serr != nil {
				t.Fatalf("%s (%d): send: %v", c.name, n, serr)
			}
			if c.mismatch != errors.Is(rerr, endpoint.ErrInvalid) || !c.mismatch && rerr != nil {
				t.Fatalf("%s (%d): receive error %v, want mismatch %v", c.name, n, rerr, c.mismatch)
			}
		}
		// parts received as one typed buffer of the same data: legal
		errc := make(chan error, 1)
		go func() {
			errc <- a.SendParts(ctx, []endpoint.Part{part(n, ddt.Float64), part(n, ddt.Float64)}, 1, 120)
		}()
		if _, err := b.RecvTyped(ctx, make([]byte, 16*n), 2*n, ddt.Float64, 0, 120); err != nil {
			t.Fatalf("two float64 parts into one float64 buffer (%d): %v", n, err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// TestFabricTypedNoAllocs: typed transfers between two endpoints of one
// process over libfabric's shm allocate nothing per message once warm,
// on every path (eager from a segment buffer, packed whole into a
// staging buffer, the segment pipeline, zero copy with its block table,
// a receive read into a staging buffer and unpacked), as one-off IsendTyped/IrecvTyped and as persistent
// requests: the requests, headers, block lists, tables and registration
// handles are kept for reuse, and the MR cache serves the same table
// again.
func TestFabricTypedNoAllocs(t *testing.T) {
	a, b, ctx := singletonPair(t, endpoint.WithNodeTransport(false))
	defer endpoint.SetTypedPath("", 0)
	for _, c := range []struct {
		name       string
		total, blk int
		path       string // forced; "" the cost model's choice
		zc         int
	}{
		{"eager", 512, 8, "", 0},
		{"packed-whole", 256 << 10, 8, "", 0}, // the cost model's choice on shm
		{"pipeline", 256 << 10, 8, "pipeline", 0},
		{"zerocopy", 256 << 10, 4096, "", 1024},
		{"read-unpacked", 256 << 10, 256, "zerocopy", 1 << 30}, // the receiver's blocks too small: staged
	} {
		t.Run(c.name, func(t *testing.T) {
			endpoint.SetTypedPath(c.path, c.zc)
			ty, err := committed(ddt.Vector(c.total/c.blk, c.blk, 2*c.blk, ddt.Byte))
			if err != nil {
				t.Fatal(err)
			}
			src, dst := make([]byte, 2*c.total), make([]byte, 2*c.total)
			for i := range src {
				src[i] = byte(i*7 + 3)
			}
			reqs := make([]*endpoint.Request, 2)
			var ferr error
			oneOff := func() {
				rr, err := b.IrecvTyped(dst, 1, ty, 0, 1)
				if err != nil {
					ferr = err
					return
				}
				sr, err := a.IsendTyped(src, 1, ty, 1, 1)
				if err != nil {
					ferr = err
					return
				}
				reqs[0], reqs[1] = rr, sr
				if err := endpoint.WaitAll(ctx, reqs...); err != nil {
					ferr = err
					return
				}
				if err := endpoint.ReleaseAll(reqs...); err != nil {
					ferr = err
				}
			}
			ps, err := a.SendInit(src, 1, ty, 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := b.RecvInit(dst, 1, ty, 0, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer ps.Free()
			defer pr.Free()
			persistent := func() {
				if err := endpoint.StartAllInto(reqs, pr, ps); err != nil {
					ferr = err
					return
				}
				ferr = endpoint.WaitAll(ctx, reqs...)
			}
			before := endpoint.TypedPaths()
			for name, round := range map[string]func(){"one-off": oneOff, "persistent": persistent} {
				for range 20 {
					round()
				}
				clear(dst)
				allocs := testing.AllocsPerRun(100, round)
				if ferr != nil {
					t.Fatalf("%s: %v", name, ferr)
				}
				for i := 0; i < len(src); i += 2 * c.blk {
					if !bytes.Equal(dst[i:i+c.blk], src[i:i+c.blk]) {
						t.Fatalf("%s: block at %d differs", name, i)
					}
				}
				if allocs != 0 && !testenv.Race {
					t.Errorf("%s: %.1f allocations per message, want 0", name, allocs)
				}
			}
			after := endpoint.TypedPaths()
			path := map[string]int{"eager": 0, "zerocopy": 1, "pipeline": 2, "read-unpacked": 4, "packed-whole": 5}[c.name]
			if after[path] == before[path] {
				t.Errorf("no message took the %s path: %v → %v", c.name, before, after)
			}
		})
	}
}
