package collectives_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
)

// BenchmarkIallreduceOverlap measures how much of an Allreduce hides
// behind computation: two endpoint handles of this process (two ranks),
// each iteration an Allreduce of a float64 vector and a computation that
// takes as long as the blocking Allreduce alone (measured first), in three
// modes side by side: blocking (Allreduce, then compute), nonblocking
// (Iallreduce, compute, Wait; the schedule advances only when driven) and
// progress (the same with WithProgress). Each of b.N repetitions runs
// every mode for overlapIters iterations, in a rotated order; the
// metrics are medians over the repetitions: the Allreduce and compute
// times alone, each mode's time per iteration, its overlap, the fraction
// of the shorter of the two that was hidden, (comm + compute −
// iteration) / min(comm, compute), and the nonblocking modes' time over
// the blocking one's in the same repetition. On a machine without a spare
// core for each rank the computation itself is preempted, and only that
// ratio means anything.
func BenchmarkIallreduceOverlap(b *testing.B) {
	eps := handles(b, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	modes := []string{"blocking", "nonblocking", "progress"}
	for _, n := range []int{8 << 10, 128 << 10} { // 64 KiB, 1 MiB
		b.Run(fmt.Sprintf("%dKiB", n*8>>10), func(b *testing.B) {
			comm := allreduceTime(ctx, b, eps, n)
			work := spinWork(comm)
			compute := timeSpin(work)
			per := make([][]time.Duration, len(modes))
			errs := onHandles(ctx, eps, nil, func(ctx context.Context, c0 *C.Coll) error {
				cs := make([]*C.Coll, len(modes))
				for m, mode := range modes {
					c, err := C.New(ctx, c0.Comm(), C.WithProgress(mode == "progress"))
					if err != nil {
						return err
					}
					defer c.Free()
					cs[m] = c
				}
				x := make([]float64, n)
				for rep := 0; rep < b.N; rep++ {
					for k := range modes {
						m := (rep + k) % len(modes)
						c := cs[m]
						if err := C.Barrier(ctx, c); err != nil {
							return err
						}
						t0 := time.Now()
						for i := 0; i < overlapIters; i++ {
							if m == 0 {
								if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil {
									return err
								}
								spin(work)
								continue
							}
							q, err := C.Iallreduce(c, nil, x, C.Sum[float64]())
							if err != nil {
								return err
							}
							spin(work)
							if err := q.Wait(ctx); err != nil {
								return err
							}
						}
						if c.Rank() == 0 {
							per[m] = append(per[m], time.Since(t0)/overlapIters)
						}
					}
				}
				return nil
			})
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			us := func(d time.Duration) float64 { return float64(d) / 1e3 }
			b.ReportMetric(us(comm), "comm-us")
			b.ReportMetric(us(compute), "compute-us")
			for m, mode := range modes {
				t := median(per[m])
				b.ReportMetric(us(t), mode+"-us")
				b.ReportMetric(float64(comm+compute-t)/float64(min(comm, compute)), mode+"-overlap")
				if m > 0 { // side by side with blocking in each repetition
					rs := make([]time.Duration, len(per[m]))
					for i := range rs {
						rs[i] = time.Duration(1e6 * float64(per[m][i]) / float64(per[0][i]))
					}
					b.ReportMetric(float64(median(rs))/1e6, mode+"/blocking")
				}
			}
		})
	}
}

// overlapIters is the iterations of one mode in one repetition.
const overlapIters = 20

// allreduceTime is the median time of a blocking Allreduce of n float64
// over eps.
func allreduceTime(ctx context.Context, b *testing.B, eps []*endpoint.Comm, n int) time.Duration {
	const reps = 31
	var ts []time.Duration
	errs := onHandles(ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		x := make([]float64, n)
		for i := 0; i < reps; i++ {
			if err := C.Barrier(ctx, c); err != nil {
				return err
			}
			t0 := time.Now()
			if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil {
				return err
			}
			if c.Rank() == 0 {
				ts = append(ts, time.Since(t0))
			}
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return median(ts)
}

func median(ts []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ts...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

var spinSink float64

// spin computes for about work units (a dependent chain of float
// operations, nothing the compiler can drop).
func spin(work int) {
	x := spinSink
	for i := 0; i < work; i++ {
		x = x*0.999999 + 1e-7
	}
	spinSink = x
}

// timeSpin is the fastest of 11 runs of spin(work): the computation's
// own time, without the preemptions of a busy machine.
func timeSpin(work int) time.Duration {
	best := time.Duration(1 << 62)
	for i := 0; i < 11; i++ {
		t0 := time.Now()
		spin(work)
		best = min(best, time.Since(t0))
	}
	return best
}

// spinWork returns the work for spin to take about d.
func spinWork(d time.Duration) int {
	const probe = 1 << 16
	per := float64(timeSpin(probe)) / probe
	return max(1, int(float64(d)/per))
}

// BenchmarkIallreduceLatency: the time of an 8-byte Allreduce over two
// endpoint handles of this process, blocking and as Iallreduce + Wait
// (what a schedule costs over the blocking code it runs).
func BenchmarkIallreduceLatency(b *testing.B) {
	eps := handles(b, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, nb := range []bool{false, true} {
		b.Run(fmt.Sprintf("nonblocking=%v", nb), func(b *testing.B) {
			errs := onHandles(ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
				x := make([]float64, 1)
				if err := C.Barrier(ctx, c); err != nil {
					return err
				}
				if c.Rank() == 0 {
					b.ResetTimer()
				}
				for i := 0; i < b.N; i++ {
					if !nb {
						if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil {
							return err
						}
						continue
					}
					q, err := C.Iallreduce(c, nil, x, C.Sum[float64]())
					if err == nil {
						err = q.Wait(ctx)
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
