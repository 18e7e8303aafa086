package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
)

// mprobeSizes cross the eager limit and the rendezvous threshold.
var mprobeSizes = []int{0, 8, 300, 20000, 200000}

// mprobeReceiver takes len(mprobeSizes) messages from src, tags 0.., by
// matched probes, in arrival order, and checks each: its status, that no
// probe sees it once taken, its bytes; the last is received truncated
// and the one before by a typed receive.
func mprobeReceiver(ctx context.Context, b *endpoint.Comm, src int) error {
	for i, sz := range mprobeSizes {
		m, err := b.Mprobe(ctx, endpoint.AnySource, endpoint.AnyTag)
		if err != nil {
			return fmt.Errorf("Mprobe %d: %w", i, err)
		}
		st := m.Status()
		if st.Source != src || st.Tag != i || st.Count != sz {
			return fmt.Errorf("Mprobe %d: status %+v, want source %d tag %d count %d", i, st, src, i, sz)
		}
		if ok, _, err := b.Iprobe(src, i); ok || err != nil {
			return fmt.Errorf("Iprobe sees the message a matched probe took: %v %v", ok, err)
		}
		if _, ok, err := b.Improbe(src, i); ok || err != nil {
			return fmt.Errorf("Improbe sees the message a matched probe took: %v %v", ok, err)
		}
		want := make([]byte, sz)
		pattern(want, src, 1, i)
		switch i {
		case len(mprobeSizes) - 1: // truncated
			got := make([]byte, sz/2)
			st, err := m.Mrecv(ctx, got)
			if !errors.Is(err, endpoint.ErrTruncated) || st.Count != len(got) || !bytes.Equal(got, want[:len(got)]) {
				return fmt.Errorf("Mrecv of %d bytes into %d: %+v %v", sz, len(got), st, err)
			}
		case len(mprobeSizes) - 2: // typed: every other 4-byte word of a twice larger buffer
			vt, err := ddt.Vector(sz/4, 1, 2, ddt.Int32)
			if err == nil {
				err = vt.Commit()
			}
			if err != nil {
				return err
			}
			got := make([]byte, 2*sz)
			if _, err := m.ImrecvTyped(got[:sz], 1, vt); !errors.Is(err, ddt.ErrBounds) {
				return fmt.Errorf("ImrecvTyped into a layout past its buffer: %v, want ErrBounds", err)
			}
			// the refused receive left the message to receive
			if st, err := m.MrecvTyped(ctx, got, 1, vt); err != nil || st.Count != sz {
				return fmt.Errorf("MrecvTyped of %d bytes: %+v %v", sz, st, err)
			}
			for w := 0; w < sz/4; w++ {
				if !bytes.Equal(got[8*w:8*w+4], want[4*w:4*w+4]) {
					return fmt.Errorf("MrecvTyped of %d bytes: word %d wrong", sz, w)
				}
			}
		default:
			got := make([]byte, st.Count)
			if st, err := m.Mrecv(ctx, got); err != nil || st.Count != sz || st.Tag != i {
				return fmt.Errorf("Mrecv of %d bytes: %+v %v", sz, st, err)
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("Mrecv of %d bytes: corrupted", sz)
			}
		}
		if _, err := m.Mrecv(ctx, nil); !errors.Is(err, endpoint.ErrInvalid) {
			return fmt.Errorf("second Mrecv of a message: %v, want ErrInvalid", err)
		}
	}
	return nil
}

func mprobeSender(ctx context.Context, a *endpoint.Comm, dst int) error {
	for i, sz := range mprobeSizes {
		b := make([]byte, sz)
		pattern(b, a.Rank(), 1, i)
		if err := a.Send(ctx, b, dst, i); err != nil {
			return fmt.Errorf("send %d bytes: %w", sz, err)
		}
	}
	return nil
}

// TestMatchedProbe: Mprobe, Improbe, Mrecv and MrecvTyped between two
// endpoints of one process, private and shared, on the node transport and
// on libfabric shm: every size class, truncation, a typed layout, the
// message off the queue once taken, a message received twice, ProcNull.
func TestMatchedProbe(t *testing.T) {
	for _, tc := range []struct {
		name, transport string
		opts            []endpoint.Option
	}{
		{"private", "", nil}, // the default: the node transport unless WEFT_NODE_TRANSPORT says fabric
		{"shared", "", []endpoint.Option{endpoint.Shared(true)}},
		{"fabric", endpoint.TransportFabric, []endpoint.Option{endpoint.WithNodeTransport(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, ctx := singletonPair(t, tc.opts...)
			if tr, err := b.Transport(0); err != nil || tc.transport != "" && tr != tc.transport {
				t.Fatalf("transport %q %v, want %q", tr, err, tc.transport)
			}
			if _, ok, err := b.Improbe(endpoint.AnySource, endpoint.AnyTag); ok || err != nil {
				t.Fatalf("Improbe of nothing: %v %v", ok, err)
			}
			sent := make(chan error, 1)
			go func() { sent <- mprobeSender(ctx, a, 1) }()
			if err := mprobeReceiver(ctx, b, 0); err != nil {
				t.Fatal(err)
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			m, ok, err := b.Improbe(endpoint.ProcNull, 3)
			if !ok || err != nil {
				t.Fatalf("Improbe(ProcNull): %v %v", ok, err)
			}
			if st, err := m.Mrecv(ctx, make([]byte, 8)); err != nil || st.Source != endpoint.ProcNull || st.Count != 0 {
				t.Fatalf("Mrecv of ProcNull's message: %+v %v", st, err)
			}
			var none *endpoint.Message
			if _, err := none.Mrecv(ctx, nil); !errors.Is(err, endpoint.ErrInvalid) {
				t.Fatalf("Mrecv of a nil message: %v", err)
			}
			cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			if _, err := b.Mprobe(cctx, 0, 99); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Mprobe of nothing: %v, want its deadline", err)
			}
		})
	}
}

// TestMatchedProbeGoroutines: several goroutines receive on one shared
// endpoint by Mprobe + Mrecv of any source and tag: each message is
// received once, whole, by the goroutine that probed it (a Probe followed
// by a Recv could receive another goroutine's message).
func TestMatchedProbeGoroutines(t *testing.T) {
	a, b, ctx := singletonPair(t, endpoint.Shared(true))
	const n, workers = 400, 4
	size := func(i int) int { return []int{1, 64, 3000, 40000}[i%4] + i }
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			buf := make([]byte, size(i))
			pattern(buf, 0, 1, i)
			if err := a.Send(ctx, buf, 1, i); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	var mu sync.Mutex
	seen := make([]int, n)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var left sync.WaitGroup
	left.Add(n)
	stop := make(chan struct{})
	go func() { left.Wait(); close(stop) }()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				m, ok, err := b.Improbe(endpoint.AnySource, endpoint.AnyTag)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					continue
				}
				st := m.Status()
				buf := make([]byte, st.Count)
				if _, err := m.Mrecv(ctx, buf); err != nil {
					errs <- err
					return
				}
				want := make([]byte, size(st.Tag))
				pattern(want, 0, 1, st.Tag)
				if !bytes.Equal(buf, want) {
					errs <- fmt.Errorf("message %d: corrupted (%d bytes)", st.Tag, len(buf))
					return
				}
				mu.Lock()
				seen[st.Tag]++
				mu.Unlock()
				left.Done()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("timed out")
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	for i, k := range seen {
		if k != 1 {
			t.Errorf("message %d received %d times", i, k)
		}
	}
}

// TestMatchedProbeProcs: the same between two processes, every provider.
func TestMatchedProbeProcs(t *testing.T) {
	onPairOfProcs(t, func(ctx context.Context, c *endpoint.Comm) error {
		if c.Rank() == 0 {
			return mprobeSender(ctx, c, 1)
		}
		return mprobeReceiver(ctx, c, 0)
	})
}

// onPairOfProcs runs body on the world communicator of two processes, on
// the node transport and every libfabric provider (match-header variants
// left out), then a barrier.
func onPairOfProcs(t *testing.T, body func(ctx context.Context, c *endpoint.Comm) error) {
	for _, p := range withHdr {
		if hdrOff(p, false, false) {
			continue
		}
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 2, p, 60*time.Second) {
				return
			}
			c := initWorld(t).Comm()
			ctx := eptest.Ctx(t, 30*time.Second)
			if err := body(ctx, c); err != nil {
				t.Fatal(err)
			}
			if err := c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestImprobeBatch: a batched matched probe takes the messages in the
// order single ones would (the tag filter skipping others, which stay),
// and each is received as an Improbe'd one: eager and rendezvous messages,
// a short buffer (ErrTruncated, Count the bytes received), ProcNull, an
// empty batch. CheckPeer: a live rank is nil, a rank outside the
// communicator ErrInvalid.
func TestImprobeBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []endpoint.Option
	}{{"native", nil}, {"fabric", []endpoint.Option{endpoint.WithNodeTransport(false)}}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, ctx := singletonPair(t, tc.opts...)
			sizes := []int{0, 8, 100, 5000, 40000, 8, 3}
			tags := []int{1, 2, 1, 1, 2, 1, 1}
			sent := make(chan error, 1)
			go func() { // all at once: the 40000 bytes wait for the second phase
				var rs []*endpoint.Request
				for i, n := range sizes {
					r, err := a.Isend(bytes.Repeat([]byte{byte(i + 1)}, n), 1, tags[i])
					if err != nil {
						sent <- err
						return
					}
					rs = append(rs, r)
				}
				sent <- endpoint.WaitAll(ctx, rs...)
			}()
			ms := make([]endpoint.Message, 3)
			var got []int // indices of the messages received, in order
			check := func(m *endpoint.Message, want int) error {
				st := m.Status()
				if st.Tag != tags[want] || st.Count != sizes[want] || st.Source != 0 {
					return fmt.Errorf("message %d: status %+v", want, st)
				}
				buf := make([]byte, st.Count)
				short := st.Count == 5000
				if short {
					buf = buf[:10]
				}
				rs, err := m.Mrecv(ctx, buf)
				switch {
				case short && (!errors.Is(err, endpoint.ErrTruncated) || rs.Count != 10):
					return fmt.Errorf("message %d into 10 bytes: %+v %v", want, rs, err)
				case !short && (err != nil || rs.Count != sizes[want]):
					return fmt.Errorf("message %d: %+v %v", want, rs, err)
				case !bytes.Equal(buf, bytes.Repeat([]byte{byte(want + 1)}, len(buf))):
					return fmt.Errorf("message %d: wrong bytes", want)
				}
				got = append(got, want)
				return nil
			}
			// Tag 1 first, then whatever is left.
			want1 := []int{0, 2, 3, 5, 6}
			for len(got) < len(want1) {
				n, err := b.ImprobeBatch(0, 1, ms)
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					if err := check(&ms[i], want1[len(got)]); err != nil {
						t.Fatal(err)
					}
				}
			}
			for len(got) < len(sizes) {
				n, err := b.ImprobeBatch(endpoint.AnySource, endpoint.AnyTag, ms)
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					if err := check(&ms[i], []int{1, 4}[len(got)-len(want1)]); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			if n, err := b.ImprobeBatch(endpoint.AnySource, endpoint.AnyTag, nil); n != 0 || err != nil {
				t.Fatalf("empty batch: %d %v", n, err)
			}
			if n, err := b.ImprobeBatch(endpoint.ProcNull, endpoint.AnyTag, ms); n != 1 || err != nil || ms[0].Status().Source != endpoint.ProcNull {
				t.Fatalf("ProcNull: %d %v %+v", n, err, ms[0].Status())
			}
			if _, err := b.ImprobeBatch(5, 0, ms); !errors.Is(err, endpoint.ErrInvalid) {
				t.Fatalf("rank 5: %v", err)
			}
			if err := b.CheckPeer(0); err != nil {
				t.Fatalf("CheckPeer of a live rank: %v", err)
			}
			if err := b.CheckPeer(2); !errors.Is(err, endpoint.ErrInvalid) {
				t.Fatalf("CheckPeer(2): %v", err)
			}
		})
	}
}
