package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
)

// fillRound writes round r's pattern into b.
func fillRound(b []byte, r int) {
	for i := range b {
		b[i] = byte(i*7 + r*13 + i>>8)
	}
}

// partitionedRounds sends rounds of buf (n bytes) from a in sp partitions
// to b in rp, marking the partitions one by one in reverse order, all at
// once, or in two runs, and checks every receive partition's bytes as soon
// as Parrived reports it.
func partitionedRounds(ctx context.Context, a, b *endpoint.Comm, n, sp, rp, rounds, tag int) error {
	sbuf, rbuf := make([]byte, n), make([]byte, n)
	ps, err := a.PsendInit(sbuf, sp, b.Rank(), tag)
	if err != nil {
		return err
	}
	pr, err := b.PrecvInit(rbuf, rp, a.Rank(), tag)
	if err != nil {
		return err
	}
	want := make([]byte, n)
	for r := 0; r < rounds; r++ {
		fillRound(want, r)
		copy(sbuf, want)
		clear(rbuf)
		errc := make(chan error, 1)
		go func() { // a's goroutine
			if err := ps.Start(); err != nil {
				errc <- err
				return
			}
			// Round by round: each partition alone in reverse order; all
			// in one message; two runs, the second half first.
			var err error
			switch r % 3 {
			case 0:
				for i := sp - 1; i >= 0 && err == nil; i-- {
					err = ps.Pready(i)
				}
			case 1:
				err = ps.PreadyRange(0, sp-1)
			default:
				var list []int
				for i := range sp {
					list = append(list, (i+sp/2)%sp)
				}
				err = ps.PreadyList(list...)
			}
			if err != nil {
				errc <- err
				return
			}
			errc <- ps.Wait(ctx)
		}()
		if err := pr.Start(); err != nil {
			return err
		}
		seen := make([]bool, rp)
		for left := rp; left > 0; {
			for i := range seen {
				if seen[i] {
					continue
				}
				ok, err := pr.Parrived(i)
				if err != nil {
					return fmt.Errorf("round %d: parrived %d: %w", r, i, err)
				}
				if ok {
					lo, hi := i*n/rp, (i+1)*n/rp
					if !bytes.Equal(rbuf[lo:hi], want[lo:hi]) {
						return fmt.Errorf("round %d: receive partition %d arrived with wrong bytes", r, i)
					}
					seen[i] = true
					left--
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := pr.Wait(ctx); err != nil {
			return fmt.Errorf("round %d: receive wait: %w", r, err)
		}
		if err := <-errc; err != nil {
			return fmt.Errorf("round %d: send: %w", r, err)
		}
		if !bytes.Equal(rbuf, want) {
			return fmt.Errorf("round %d: buffer differs", r)
		}
	}
	return errors.Join(ps.Free(), pr.Free())
}

// TestPartitioned: partitioned sends between two handles of one process,
// partition counts alike and different, eager and rendezvous sizes,
// several rounds; arrivals seen partition by partition.
func TestPartitioned(t *testing.T) {
	a, b, ctx := singletonPair(t)
	for _, tc := range []struct{ n, sp, rp int }{
		{64, 4, 4}, {64, 8, 2}, {96, 3, 6}, {0, 2, 1}, {48, 1, 16},
		{1 << 20, 4, 8}, {3 << 18, 16, 3}, {256 << 10, 64, 64},
	} {
		if err := partitionedRounds(ctx, a, b, tc.n, tc.sp, tc.rp, 6, 5); err != nil {
			t.Fatalf("%d bytes, %d → %d partitions: %v", tc.n, tc.sp, tc.rp, err)
		}
	}
}

// TestPartitionedEarly: a receive partition is reported as soon as its
// send partition is ready, while the sender holds the others back.
func TestPartitionedEarly(t *testing.T) {
	a, b, ctx := singletonPair(t)
	for _, n := range []int{4 << 10, 1 << 20} { // eager and rendezvous partitions
		sbuf, rbuf := make([]byte, 4*n), make([]byte, 4*n)
		fillRound(sbuf, 1)
		ps, err := a.PsendInit(sbuf, 4, 1, 9)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := b.PrecvInit(rbuf, 4, 0, 9)
		if err != nil {
			t.Fatal(err)
		}
		next := make(chan int)
		errc := make(chan error, 1)
		go func() {
			err := ps.Start()
			for i := range 4 {
				if err == nil {
					err = ps.Pready(i)
				}
				if i < 3 {
					<-next // the receiver saw partition i
				}
			}
			if err == nil {
				err = ps.Wait(ctx)
			}
			errc <- err
		}()
		if err := pr.Start(); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			for {
				ok, err := pr.Parrived(i)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					break
				}
				if i+1 < 4 {
					if ok, _ := pr.Parrived(i + 1); ok {
						t.Fatalf("%d B: partition %d arrived before the sender marked it", n, i+1)
					}
				}
				if ctx.Err() != nil {
					t.Fatalf("%d B: partition %d never arrived: %v", n, i, ctx.Err())
				}
			}
			if !bytes.Equal(rbuf[i*n:(i+1)*n], sbuf[i*n:(i+1)*n]) {
				t.Fatalf("%d B: partition %d differs", n, i)
			}
			if i < 3 {
				next <- i
			}
		}
		if err := pr.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(ps.Free(), pr.Free()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPartitionedMatching: partitioned operations pair in the order they
// were initialised and never meet ordinary messages of the same tag.
func TestPartitionedMatching(t *testing.T) {
	a, b, ctx := singletonPair(t)
	s1, s2 := []byte("first..."), []byte("second..")
	r1, r2 := make([]byte, 8), make([]byte, 8)
	ps1, err := a.PsendInit(s1, 2, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	ps2, err := a.PsendInit(s2, 4, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	// An ordinary message with the same tag, sent between the two.
	if err := a.Send(ctx, []byte("ordinary"), 1, 3); err != nil {
		t.Fatal(err)
	}
	pr1, err := b.PrecvInit(r1, 1, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	pr2, err := b.PrecvInit(r2, 2, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	ord := make([]byte, 8)
	if _, err := b.Recv(ctx, ord, 0, 3); err != nil || string(ord) != "ordinary" {
		t.Fatalf("ordinary receive got %q, %v", ord, err)
	}
	// The second pair's round first.
	for _, p := range []*endpoint.Partitioned{ps2, pr2, ps1, pr1} {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ps2.PreadyRange(0, 3); err != nil {
		t.Fatal(err)
	}
	if err := ps1.PreadyList(1, 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*endpoint.Partitioned{pr2, pr1, ps1, ps2} {
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if string(r1) != string(s1) || string(r2) != string(s2) {
		t.Fatalf("paired out of order: %q %q", r1, r2)
	}
	for _, p := range []*endpoint.Partitioned{ps1, ps2, pr1, pr2} {
		if err := p.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPartitionedErrors: misuse gets ErrInvalid, never a hang; ProcNull
// completes at once.
func TestPartitionedErrors(t *testing.T) {
	a, b, ctx := singletonPair(t)
	buf := make([]byte, 64)
	for name, f := range map[string]func() error{
		"zero partitions": func() error { _, err := a.PsendInit(buf, 0, 1, 0); return err },
		"not dividing":    func() error { _, err := a.PsendInit(buf, 3, 1, 0); return err },
		"too many": func() error {
			_, err := a.PsendInit(make([]byte, 2*endpoint.MaxPartitions), 2*endpoint.MaxPartitions, 1, 0)
			return err
		},
		"any source":        func() error { _, err := b.PrecvInit(buf, 1, endpoint.AnySource, 0); return err },
		"any tag":           func() error { _, err := b.PrecvInit(buf, 1, 0, endpoint.AnyTag); return err },
		"rank out of range": func() error { _, err := a.PsendInit(buf, 1, 2, 0); return err },
		"nil pready":        func() error { return (*endpoint.Partitioned)(nil).Pready(0) },
		"nil wait":          func() error { return (*endpoint.Partitioned)(nil).Wait(ctx) },
		"nil start":         func() error { return (*endpoint.Partitioned)(nil).Start() },
	} {
		if err := f(); !errors.Is(err, endpoint.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	ps, err := a.PsendInit(buf, 4, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := b.PrecvInit(buf[:32], 2, 0, 1) // a different length
	if err != nil {
		t.Fatal(err)
	}
	// In this order: the first cases need the requests not started.
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"pready before start", func() error { return ps.Pready(0) }},
		{"wait before start", func() error { return ps.Wait(ctx) }},
		{"parrived on a send", func() error { ps.Start(); _, err := ps.Parrived(0); return err }},
		{"start twice", func() error { return ps.Start() }},
		{"pready out of range", func() error { return ps.Pready(4) }},
		{"pready twice", func() error { ps.Pready(1); return ps.Pready(1) }},
		{"range backwards", func() error { return ps.PreadyRange(3, 2) }},
		{"list with a partition twice", func() error { return ps.PreadyList(2, 2) }}, // marks nothing: 2 is marked below
		{"free while active", func() error { return ps.Free() }},
		{"pready on a receive", func() error { pr.Start(); return pr.Pready(0) }},
		{"parrived out of range", func() error { _, err := pr.Parrived(2); return err }},
	} {
		if err := tc.f(); !errors.Is(err, endpoint.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
	// The receive of another length fails on its side.
	if err := ps.PreadyList(0, 2, 3); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pr.Wait(wctx); !errors.Is(err, endpoint.ErrInvalid) {
		t.Errorf("receive of 32 bytes paired with a send of 64: %v, want ErrInvalid", err)
	}
	wctx2, cancel2 := context.WithTimeout(ctx, 3*time.Second)
	defer cancel2()
	if err := ps.Wait(wctx2); err != nil { // eager partitions complete at the sender
		t.Fatal(err)
	}
	if err := errors.Join(ps.Free(), pr.Free()); err != nil {
		t.Fatal(err)
	}
	// ProcNull.
	pn, err := a.PsendInit(buf, 2, endpoint.ProcNull, 0)
	if err != nil {
		t.Fatal(err)
	}
	rn, err := b.PrecvInit(buf, 2, endpoint.ProcNull, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := errors.Join(pn.Start(), rn.Start(), pn.PreadyRange(0, 1)); err != nil {
			t.Fatal(err)
		}
		if ok, err := rn.Parrived(1); !ok || err != nil {
			t.Fatalf("ProcNull parrived: %v %v", ok, err)
		}
		if err := errors.Join(pn.Wait(ctx), rn.Wait(ctx)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPartitionedProcs: two processes over the world communicator (a
// shared endpoint): four goroutines mark the send partitions they have
// "computed" at once while the main one waits, and four goroutines at the
// receiver each wait for theirs with Parrived.
func TestPartitionedProcs(t *testing.T) {
	for _, p := range providers {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 2, p, 60*time.Second) {
				return
			}
			w := initWorld(t)
			ctx := eptest.Ctx(t, 30*time.Second)
			c := w.Comm()
			for _, part := range []int{512, 256 << 10} {
				const parts, rounds = 4, 3
				buf := make([]byte, parts*part)
				var pt *endpoint.Partitioned
				var err error
				if c.Rank() == 0 {
					pt, err = c.PsendInit(buf, parts, 1, 4)
				} else {
					pt, err = c.PrecvInit(buf, parts, 0, 4)
				}
				if err != nil {
					t.Fatal(err)
				}
				for r := range rounds {
					if c.Rank() == 1 {
						clear(buf)
					}
					if err := pt.Start(); err != nil {
						t.Fatal(err)
					}
					var wg sync.WaitGroup
					errs := make([]error, parts)
					for i := range parts {
						wg.Add(1)
						go func() {
							defer wg.Done()
							mine := buf[i*part : (i+1)*part]
							if c.Rank() == 0 {
								fillRound(mine, r*parts+i)
								errs[i] = pt.Pready(i)
								return
							}
							for {
								ok, err := pt.Parrived(i)
								if err != nil || ok {
									errs[i] = err
									break
								}
								if ctx.Err() != nil {
									errs[i] = ctx.Err()
									return
								}
							}
							want := make([]byte, part)
							fillRound(want, r*parts+i)
							if !bytes.Equal(mine, want) {
								errs[i] = fmt.Errorf("partition %d of round %d differs", i, r)
							}
						}()
					}
					if err := pt.Wait(ctx); err != nil {
						t.Fatalf("%d B partitions, round %d: %v", part, r, err)
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						t.Fatalf("%d B partitions, round %d: %v", part, r, err)
					}
				}
				if err := pt.Free(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// ExampleComm_PsendInit sends a buffer in four partitions, each marked
// ready by the goroutine that computed it, over shared handles (which
// several goroutines may drive at once).
func ExampleComm_PsendInit() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	eps, err := w.Comm().CreateEndpoints(ctx, 2, endpoint.Shared(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	a, b := eps[0], eps[1]
	const parts = 4
	sbuf, rbuf := make([]float64, 4*parts), make([]float64, 4*parts)
	ps, _ := a.PsendInit(endpoint.AsBytes(sbuf), parts, 1, 0)
	pr, _ := b.PrecvInit(endpoint.AsBytes(rbuf), parts, 0, 0)
	_ = pr.Start()
	_ = ps.Start()
	for i := range parts {
		go func() { // a worker computes its partition, then marks it ready
			for j := i * 4; j < (i+1)*4; j++ {
				sbuf[j] = float64(j * j)
			}
			_ = ps.Pready(i)
		}()
	}
	// Use each partition as it arrives.
	sum, seen := 0.0, make([]bool, parts)
	for left := parts; left > 0; {
		for i := range parts {
			if ok, _ := pr.Parrived(i); ok && !seen[i] {
				for _, x := range rbuf[i*4 : (i+1)*4] {
					sum += x
				}
				seen[i] = true
				left--
			}
		}
	}
	fmt.Println(ps.Wait(ctx), pr.Wait(ctx), sum)
	// Output: <nil> <nil> 1240
}
