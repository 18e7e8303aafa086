package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/fabric"
)

// Path cost: one goroutine drives both ends of an 8-byte ping-pong over
// shm, so no time is spent waiting for another thread; the result is the
// CPU cost of a send plus a receive through each path. It is far less
// sensitive to a loaded machine than the two-process latency benchmark.

func BenchmarkPathCost8B(b *testing.B) {
	b.Run("endpoint", func(b *testing.B) {
		x, y, ctx := benchPair(b, false)
		msg, in := make([]byte, 8), make([]byte, 8)
		// Connect first (shm sets a peer up when the receiver progresses).
		go func() {
			if _, err := y.Recv(ctx, in, 0, 1); err != nil {
				b.Error(err)
			}
		}()
		if err := x.Send(ctx, msg, 1, 1); err != nil {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		b.ReportAllocs()
		b.ResetTimer()
		c0 := runtime.NumCgoCall()
		defer func() { b.ReportMetric(float64(runtime.NumCgoCall()-c0)/float64(b.N), "cgo/op") }()
		for i := 0; i < b.N; i++ {
			if err := x.Send(ctx, msg, 1, 1); err != nil {
				b.Fatal(err)
			}
			if _, err := y.Recv(ctx, in, 0, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-untagged", func(b *testing.B) { rawPathCost(b, true) })
	b.Run("raw-tagged", func(b *testing.B) { rawPathCost(b, false) })
}

func rawPathCost(b *testing.B, untagged bool) {
	x, y, _ := benchPair(b, false)
	rx, err := rawEP(x)
	if err != nil {
		b.Fatal(err)
	}
	defer rx.close()
	ry, err := rawEP(y)
	if err != nil {
		b.Fatal(err)
	}
	defer ry.close()
	ax, err := rx.av.Insert(ry.name)
	if err != nil {
		b.Fatal(err)
	}
	// Connect first: the receiver must progress while the first inject waits.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, _ := ry.cq.Read(ry.comps[:])
			if n > 0 {
				return
			}
		}
	}()
	if err := ry.ep.Recv(ry.buf.Bytes()[8:16], ry.buf.Desc(), fabric.AddrUnspec, 7); err != nil {
		b.Fatal(err)
	}
	for {
		err = rx.ep.InjectData(rx.buf.Bytes()[:8], 1, ax[0])
		if !errors.Is(err, fabric.ErrAgain) {
			break
		}
		rx.cq.Read(rx.comps[:])
	}
	if err != nil {
		b.Fatal(err)
	}
	<-done
	sb := rx.buf.Bytes()[:8]
	rb := ry.buf.Bytes()[8:16]
	b.ReportAllocs()
	b.ResetTimer()
	c0 := runtime.NumCgoCall()
	defer func() { b.ReportMetric(float64(runtime.NumCgoCall()-c0)/float64(b.N), "cgo/op") }()
	for i := 0; i < b.N; i++ {
		if untagged {
			err = ry.ep.Recv(rb, ry.buf.Desc(), fabric.AddrUnspec, 7)
		} else {
			err = ry.ep.TRecv(rb, ry.buf.Desc(), fabric.AddrUnspec, 1, 0, 7)
		}
		if err != nil {
			b.Fatal(err)
		}
		for {
			if untagged {
				err = rx.ep.InjectData(sb, 1, ax[0])
			} else {
				err = rx.ep.TInject(sb, ax[0], 1)
			}
			if !errors.Is(err, fabric.ErrAgain) {
				break
			}
			rx.cq.Read(rx.comps[:])
		}
		if err != nil {
			b.Fatal(err)
		}
		for {
			n, err := ry.cq.Read(ry.comps[:])
			if err != nil && !errors.Is(err, fabric.ErrAgain) {
				b.Fatal(err)
			}
			if n > 0 {
				break
			}
		}
	}
}

// TestSendRecvNoAllocs: a blocking eager Send and Recv on a private
// endpoint allocate nothing per message (the receive request is reused).
func TestSendRecvNoAllocs(t *testing.T) {
	singleton(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Comm().Size() != 1 {
		t.Fatalf("WEFT_PMI=singleton gave a job of %d ranks", w.Comm().Size())
	}
	eps, err := w.Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	x, y := eps[0], eps[1]
	msg, in := []byte("12345678"), make([]byte, 8)
	done := make(chan error, 1)
	go func() { _, err := y.Recv(ctx, in, 0, 1); done <- err }() // connects
	if err := x.Send(ctx, msg, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var ferr error
	allocs := testing.AllocsPerRun(1000, func() {
		if err := x.Send(ctx, msg, 1, 1); err != nil {
			ferr = err
		}
		st, err := y.Recv(ctx, in, 0, 1)
		if err != nil || st.Count != 8 || st.Source != 0 {
			ferr = fmt.Errorf("recv: %v %+v", err, st)
		}
	})
	if ferr != nil {
		t.Fatal(ferr)
	}
	if string(in) != string(msg) {
		t.Fatalf("received %q, want %q", in, msg)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per Send+Recv, want 0", allocs)
	}
}

// TestReleaseReuses: a window of Irecv + Isend + WaitAll whose receives are
// released allocates nothing per message once warm, on both transports;
// Release refuses a request in flight and a second Release.
func TestReleaseReuses(t *testing.T) {
	for _, native := range []bool{true, false} {
		x, y, ctx := singletonPair(t, endpoint.WithNodeTransport(native))
		msg := []byte("12345678")
		bufs := make([][]byte, 16)
		for i := range bufs {
			bufs[i] = make([]byte, 8)
		}
		reqs := make([]*endpoint.Request, len(bufs))
		var ferr error
		window := func() {
			for i := range reqs {
				var err error
				if reqs[i], err = y.Irecv(bufs[i], 0, 3); err != nil {
					ferr = err
					return
				}
			}
			for range reqs {
				if _, err := x.Isend(msg, 1, 3); err != nil {
					ferr = err
					return
				}
			}
			ferr = waitRelease(ctx, reqs)
		}
		// The same with the messages arriving before their receives
		// (unexpected): their payload buffers and queue are reused too.
		late := func() {
			for range reqs {
				if _, err := x.Isend(msg, 1, 3); err != nil {
					ferr = err
					return
				}
			}
			if _, _, err := y.Iprobe(0, 999); err != nil { // drains them into the unexpected queue
				ferr = err
				return
			}
			for i := range reqs {
				var err error
				if reqs[i], err = y.Irecv(bufs[i], 0, 3); err != nil {
					ferr = err
					return
				}
			}
			ferr = waitRelease(ctx, reqs)
		}
		window() // connects, warms the free list
		late()
		if native {
			if allocs := testing.AllocsPerRun(200, window); allocs != 0 {
				t.Errorf("native: %.1f allocations per window of %d messages, want 0", allocs, len(reqs))
			}
			if allocs := testing.AllocsPerRun(200, late); allocs != 0 {
				t.Errorf("native, unexpected: %.1f allocations per window of %d messages, want 0", allocs, len(reqs))
			}
		} else {
			for i := 0; i < 200; i++ {
				window()
			}
		}
		if ferr != nil {
			t.Fatal(ferr)
		}
		for i, b := range bufs {
			if string(b) != string(msg) {
				t.Fatalf("native=%v: buffer %d holds %q", native, i, b)
			}
		}
		r, err := y.Irecv(make([]byte, 8), 0, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Release(); !errors.Is(err, endpoint.ErrInvalid) {
			t.Fatalf("native=%v: Release in flight: %v", native, err)
		}
		if err := x.Send(ctx, msg, 1, 4); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Release(); err != nil {
			t.Fatal(err)
		}
		if err := r.Release(); !errors.Is(err, endpoint.ErrInvalid) {
			t.Fatalf("native=%v: second Release: %v", native, err)
		}
		var nilReq *endpoint.Request
		if nilReq.Release() != nil {
			t.Fatal("Release of nil")
		}
	}
}

// TestMatchHeaderEagerNoAllocs: in match-header mode an eager send above
// the inject size copies its data behind the header into a registered
// segment buffer of the endpoint, allocating no buffer per send: a
// window of such sends allocates no more than it does with the match
// word in CQ data, and far fewer bytes than the messages hold.
func TestMatchHeaderEagerNoAllocs(t *testing.T) {
	defer endpoint.ForceMatchHeader(false)
	const size, window = 12 << 10, 8 // above shm's inject size, below the eager limit
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	var allocs [2]float64
	for i, hdr := range []bool{false, true} {
		endpoint.ForceMatchHeader(hdr)
		x, y, ctx := singletonPair(t, endpoint.WithNodeTransport(false))
		bufs := make([][]byte, window)
		for j := range bufs {
			bufs[j] = make([]byte, size)
		}
		reqs := make([]*endpoint.Request, 2*window)
		var ferr error
		round := func() {
			for j := range bufs {
				var err error
				if reqs[j], err = y.Irecv(bufs[j], 0, 5); err != nil {
					ferr = err
					return
				}
				if reqs[window+j], err = x.Isend(msg, 1, 5); err != nil {
					ferr = err
					return
				}
			}
			ferr = waitRelease(ctx, reqs)
		}
		round()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		allocs[i] = testing.AllocsPerRun(50, round)
		runtime.ReadMemStats(&after)
		if ferr != nil {
			t.Fatalf("match header %v: %v", hdr, ferr)
		}
		for j, b := range bufs {
			if string(b) != string(msg) {
				t.Fatalf("match header %v: message %d corrupted", hdr, j)
			}
		}
		perSend := float64(after.TotalAlloc-before.TotalAlloc) / (51 * window)
		t.Logf("match header %v: %.1f allocations per window of %d, %.0f bytes per send", hdr, allocs[i], window, perSend)
		if hdr && perSend > size/4 {
			t.Errorf("match header: %.0f bytes allocated per %d-byte eager send: a buffer per send", perSend, size)
		}
	}
	if allocs[1] > allocs[0] {
		t.Errorf("match header: %.1f allocations per window of %d eager sends, %.1f with CQ data", allocs[1], window, allocs[0])
	}
}

// waitRelease waits for reqs and releases them for reuse.
func waitRelease(ctx context.Context, reqs []*endpoint.Request) error {
	if err := endpoint.WaitAll(ctx, reqs...); err != nil {
		return err
	}
	for _, r := range reqs {
		if err := r.Release(); err != nil {
			return err
		}
	}
	return nil
}

// TestReleaseAll: a window of completed receives (and the shared request
// of sends complete at once, and nil) released in one call is reused by
// the next window, allocating nothing; one request still in flight makes
// the call fail with ErrInvalid and release none of them; a request
// released before, or listed twice, gives ErrInvalid; requests of two
// endpoints go in one call.
func TestReleaseAll(t *testing.T) {
	x, y, ctx := singletonPair(t, endpoint.WithNodeTransport(true))
	msg := []byte("abcdefgh")
	bufs := make([][]byte, 16)
	for i := range bufs {
		bufs[i] = make([]byte, 8)
	}
	reqs := make([]*endpoint.Request, 0, 2*len(bufs)+1)
	var ferr error
	window := func() {
		reqs = reqs[:0]
		for i := range bufs {
			r, err := y.Irecv(bufs[i], 0, 6)
			if err != nil {
				ferr = err
				return
			}
			reqs = append(reqs, r)
		}
		for range bufs {
			r, err := x.Isend(msg, 1, 6)
			if err != nil {
				ferr = err
				return
			}
			reqs = append(reqs, r)
		}
		reqs = append(reqs, nil)
		if err := endpoint.WaitAll(ctx, reqs...); err != nil {
			ferr = err
			return
		}
		ferr = endpoint.ReleaseAll(reqs...)
	}
	window()
	if allocs := testing.AllocsPerRun(200, window); allocs != 0 {
		t.Errorf("%.1f allocations per window of %d messages, want 0", allocs, len(bufs))
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	for i, b := range bufs {
		if string(b) != string(msg) {
			t.Fatalf("buffer %d holds %q", i, b)
		}
	}

	// One in flight: nothing released, so each may still be released alone.
	done := make([]*endpoint.Request, 3)
	for i := range done {
		var err error
		if done[i], err = y.Irecv(bufs[i], 0, 7); err != nil {
			t.Fatal(err)
		}
		if err := x.Send(ctx, msg, 1, 7); err != nil {
			t.Fatal(err)
		}
		if _, err := done[i].Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	open, err := y.Irecv(bufs[3], 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := endpoint.ReleaseAll(done[0], open, done[1], done[2]); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("ReleaseAll with a request in flight: %v", err)
	}
	if err := done[0].Release(); err != nil {
		t.Fatalf("a completed request was released by the failed ReleaseAll: %v", err)
	}
	if err := endpoint.ReleaseAll(done[1], done[0]); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("ReleaseAll of a released request: %v", err)
	}
	if err := done[1].Release(); err != nil {
		t.Fatalf("the failed ReleaseAll released the request beside the released one: %v", err)
	}
	if err := endpoint.ReleaseAll(done[2], done[2]); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("ReleaseAll of a request listed twice: %v", err)
	}
	if err := done[2].Release(); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("a request listed twice was not released: %v", err)
	}
	if err := x.Send(ctx, msg, 1, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := open.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Requests of two endpoints in one call.
	back, err := x.Irecv(make([]byte, 8), 1, 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Send(ctx, msg, 0, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := back.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := endpoint.ReleaseAll(open, back); err != nil {
		t.Fatal(err)
	}
	if err := endpoint.ReleaseAll(); err != nil {
		t.Fatal(err)
	}
}
