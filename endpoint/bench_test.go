package endpoint_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/fabric"
)

// In-process benchmarks (a singleton job over shm): two goroutines, each
// owning one endpoint, ping-pong 8-byte messages. The multi-process
// versions, and the message-rate and queue-depth studies, are in
// test/bench/endpoint (see docs/perf/endpoint.md).

func benchPair(b *testing.B, shared bool) (x, y *endpoint.Comm, ctx context.Context) {
	singleton(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	if w.Comm().Size() != 1 {
		b.Fatalf("WEFT_PMI=singleton gave a job of %d ranks", w.Comm().Size())
	}
	eps, err := w.Comm().CreateEndpoints(ctx, 2, endpoint.Shared(shared))
	if err != nil {
		b.Fatal(err)
	}
	return eps[0], eps[1], ctx
}

func BenchmarkPingPong8B(b *testing.B) {
	for _, mode := range []string{"private", "shared"} {
		b.Run(mode, func(b *testing.B) {
			x, y, ctx := benchPair(b, mode == "shared")
			msg := make([]byte, 8)
			in := make([]byte, 8)
			var wg sync.WaitGroup
			wg.Add(1)
			n := b.N
			go func() { // y echoes
				defer wg.Done()
				buf := make([]byte, 8)
				for i := 0; i < n; i++ {
					if _, err := y.Recv(ctx, buf, 0, 1); err != nil {
						b.Error(err)
						return
					}
					if err := y.Send(ctx, buf, 0, 1); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			b.ResetTimer()
			for i := 0; i < n; i++ {
				if err := x.Send(ctx, msg, 1, 1); err != nil {
					b.Fatal(err)
				}
				if _, err := x.Recv(ctx, in, 1, 1); err != nil {
					b.Fatal(err)
				}
			}
			wg.Wait()
		})
	}
	b.Run("raw-fabric", func(b *testing.B) {
		x, y, ctx := benchPair(b, false)
		rx, err := rawEP(x)
		if err != nil {
			b.Fatal(err)
		}
		ry, err := rawEP(y)
		if err != nil {
			b.Fatal(err)
		}
		ax, err := rx.av.Insert(ry.name)
		if err != nil {
			b.Fatal(err)
		}
		ay, err := ry.av.Insert(rx.name)
		if err != nil {
			b.Fatal(err)
		}
		_ = ctx
		n := b.N
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := ry.recv(); err != nil {
					b.Error(err)
					return
				}
				if err := ry.send(ay[0]); err != nil {
					b.Error(err)
					return
				}
			}
		}()
		b.ResetTimer()
		for i := 0; i < n; i++ {
			if err := rx.send(ax[0]); err != nil {
				b.Fatal(err)
			}
			if err := rx.recv(); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		rx.close()
		ry.close()
	})
}

type rawFab struct {
	cq    *fabric.CQ
	av    *fabric.AV
	ep    *fabric.Endpoint
	name  []byte
	buf   *fabric.Buffer
	comps [8]fabric.Completion
}

func rawEP(c *endpoint.Comm) (*rawFab, error) {
	r := &rawFab{}
	var err error
	d := c.Domain()
	if r.cq, err = d.OpenCQ(64); err != nil {
		return nil, err
	}
	if r.av, err = d.OpenAV(4); err != nil {
		return nil, err
	}
	if r.ep, err = d.OpenEndpoint(c.Info(), r.cq, r.av); err != nil {
		return nil, err
	}
	if r.name, err = r.ep.Name(); err != nil {
		return nil, err
	}
	r.buf, err = d.Alloc(4096)
	return r, err
}

func (r *rawFab) send(to fabric.Addr) error {
	b := r.buf.Bytes()[:8]
	for {
		err := r.ep.TInject(b, to, 1)
		if !errors.Is(err, fabric.ErrAgain) {
			return err
		}
		r.cq.Read(r.comps[:])
	}
}

func (r *rawFab) recv() error {
	if err := r.ep.TRecv(r.buf.Bytes()[8:16], r.buf.Desc(), fabric.AddrUnspec, 1, 0, 7); err != nil {
		return err
	}
	for spins := 1; ; spins++ {
		n, err := r.cq.Read(r.comps[:])
		if err != nil && !errors.Is(err, fabric.ErrAgain) {
			return err
		}
		if n > 0 {
			return nil
		}
		if spins&63 == 0 { // same yield policy as Request.Wait
			runtime.Gosched()
		}
	}
}

func (r *rawFab) close() {
	r.ep.Close()
	r.av.Close()
	r.cq.Close()
	r.buf.Close()
}

// BenchmarkRate8B is the per-message cost of both ends in one goroutine:
// per window, 64 receives posted on y, 64 sends of 8 bytes from x, one
// WaitAll over the receives, which are then released (ReleaseAll); ns/op is per
// message (send + receive). native-batch sends each window with one
// IsendBatch.
func BenchmarkRate8B(b *testing.B) {
	for _, tr := range []string{"native", "native-batch", "fabric"} {
		b.Run(tr, func(b *testing.B) {
			singleton(b)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			eps, err := w.Comm().CreateEndpoints(ctx, 2, endpoint.WithNodeTransport(tr != "fabric"))
			if err != nil {
				b.Fatal(err)
			}
			x, y := eps[0], eps[1]
			const window = 64
			msg := make([]byte, 8)
			bufs := make([][]byte, window)
			for i := range bufs {
				bufs[i] = make([]byte, 8)
			}
			reqs := make([]*endpoint.Request, window)
			batch := make([]endpoint.Msg, window)
			for i := range batch {
				batch[i] = endpoint.Msg{Buf: msg, Dest: 1, Tag: 1}
			}
			sends := make([]*endpoint.Request, 0, window)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += window {
				for i := range reqs {
					if reqs[i], err = y.Irecv(bufs[i], 0, 1); err != nil {
						b.Fatal(err)
					}
				}
				if tr == "native-batch" {
					if sends, err = x.IsendBatch(sends[:0], batch); err != nil {
						b.Fatal(err)
					}
				} else {
					for range reqs {
						if _, err := x.Isend(msg, 1, 1); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := endpoint.WaitAll(ctx, reqs...); err != nil {
					b.Fatal(err)
				}
				if err := endpoint.ReleaseAll(reqs...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
