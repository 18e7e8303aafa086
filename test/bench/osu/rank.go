package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// rankMain is one process of a weft job (-role rank), the counterpart of
// mpi/osu.c with the same loops and output:
//
//	-role rank HANDLES ITERS COLLECTIVE,... SIZE...
//
// HANDLES endpoint handles of this process (CreateEndpoints) are ranks
// of the communicator the collectives run over, each driven by its own
// goroutine.
func rankMain(args []string, stdout io.Writer) error {
	if len(args) < 4 {
		return fmt.Errorf("%w: -role rank HANDLES ITERS COLLECTIVE,... SIZE...", sidebyside.ErrUsage)
	}
	var nums []int
	for i, a := range append(args[:2:2], args[3:]...) {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 || (i < 2 && n < 1) {
			return fmt.Errorf("%w: -role rank: argument %q is not a positive integer", sidebyside.ErrUsage, a)
		}
		nums = append(nums, n)
	}
	colls := sidebyside.List(args[2])
	for _, k := range colls {
		if !knownColl(k) {
			return fmt.Errorf("%w: -role rank: unknown collective %q", sidebyside.ErrUsage, k)
		}
	}
	var mu sync.Mutex
	return onHandles(nums[0], func(ctx context.Context, e *endpoint.Comm) error {
		return handleMain(ctx, e, nums[1], colls, nums[2:], func(line string) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintln(stdout, line)
		})
	})
}

// onHandles joins the weft job, makes n endpoint handles of this process
// (CreateEndpoints) and runs body on each in its own goroutine; it
// returns the first error.
func onHandles(n int, body func(ctx context.Context, e *endpoint.Comm) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	eps, err := w.Comm().CreateEndpoints(ctx, n)
	if err != nil {
		return err
	}
	defer func() {
		for _, e := range eps {
			e.Free()
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(eps))
	for i, e := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sidebyside.WarmCore()
			errs[i] = body(ctx, e)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// handleMain runs the loops of every collective and size on one rank;
// rank 0 reports.
func handleMain(ctx context.Context, e *endpoint.Comm, iters int, colls []string, sizes []int, report func(string)) error {
	c, err := C.New(ctx, e)
	if err != nil {
		return err
	}
	defer c.Free()
	p := c.Size()
	most := 4
	for _, s := range sizes {
		most = max(most, s)
	}
	sb, rb := make([]byte, most*p), make([]byte, most*p)
	// Written once, as OSU's buffers are (memset): a fresh Go allocation
	// is untouched memory whose reads, a peer's process_vm_readv's too,
	// all map the kernel's one zero page, hot in the cache, where the
	// MPI programs' buffers are real pages.
	for _, b := range [][]byte{sb, rb} {
		for i := range b {
			b[i] = 1
		}
	}
	for _, k := range colls {
		for i, size := range sizes {
			if noData(k) {
				if i > 0 {
					break
				}
				size = 0
			}
			n := iters
			if size > 8192 {
				n = max(iters/10, 10)
			}
			mine, err := osuLoop(ctx, c, k, sb, rb, size, n, max(n/10, 2))
			if err != nil {
				return fmt.Errorf("rank %d: %s %d B: %w", c.Rank(), k, size, err)
			}
			sum := []float64{0}
			if err := C.Reduce(ctx, c, []float64{mine}, sum, C.Sum[float64](), 0); err != nil {
				return err
			}
			if c.Rank() == 0 {
				report(fmt.Sprintf("RESULT %s %d %.4f", k, size, sum[0]/float64(p)))
			}
		}
	}
	return nil
}

// envTouch, set in a rank's environment, makes its loop write the send
// buffer before each call, untimed, then barrier (-touch).
const envTouch = "OSU_TOUCH"

// osuLoop is OSU's loop: skip untimed and iters timed calls, each timed
// alone and followed by an untimed Barrier (none for the barrier test);
// with envTouch set, each call is preceded by a write of the send buffer
// and a Barrier, untimed; it returns this rank's mean latency in
// microseconds.
func osuLoop(ctx context.Context, c *C.Coll, k string, sb, rb []byte, size, iters, skip int) (float64, error) {
	p := c.Size()
	sf, rf := floats(sb[:size]), floats(rb[:size])
	k, last := rootOf(k)
	root := 0
	if last {
		root = p - 1
	}
	var call func() error
	switch k {
	case "barrier":
		call = func() error { return C.Barrier(ctx, c) }
	case "bcast":
		call = func() error { return C.Bcast(ctx, c, sb[:size], root) }
	case "reduce":
		call = func() error {
			if c.Rank() == root {
				return C.Reduce(ctx, c, sf, rf, C.Sum[float32](), root)
			}
			return C.Reduce(ctx, c, sf, nil, C.Sum[float32](), root)
		}
	case "allreduce":
		call = func() error { return C.Allreduce(ctx, c, sf, rf, C.Sum[float32]()) }
	case "allgather":
		call = func() error { return C.Allgather(ctx, c, sb[:size], rb[:p*size]) }
	case "alltoall":
		call = func() error { return C.Alltoall(ctx, c, sb[:p*size], rb[:p*size]) }
	default: // the nonblocking forms: start, then wait (OSU's pure latency)
		start := map[string]func() (*C.Request, error){
			"ibarrier": func() (*C.Request, error) { return C.Ibarrier(c) },
			"ibcast":   func() (*C.Request, error) { return C.Ibcast(c, sb[:size], root) },
			"ireduce": func() (*C.Request, error) {
				if c.Rank() == root {
					return C.Ireduce(c, sf, rf, C.Sum[float32](), root)
				}
				return C.Ireduce(c, sf, nil, C.Sum[float32](), root)
			},
			"iallreduce": func() (*C.Request, error) { return C.Iallreduce(c, sf, rf, C.Sum[float32]()) },
			"iallgather": func() (*C.Request, error) { return C.Iallgather(c, sb[:size], rb[:p*size]) },
			"ialltoall":  func() (*C.Request, error) { return C.Ialltoall(c, sb[:p*size], rb[:p*size]) },
		}[k]
		call = func() error {
			q, err := start()
			if err != nil {
				return err
			}
			return q.Wait(ctx)
		}
	}
	var total time.Duration
	touch := os.Getenv(envTouch) != ""
	for i := 0; i < skip+iters; i++ {
		if touch && !noData(k) {
			n := size
			if k == "alltoall" || k == "ialltoall" {
				n = p * size
			}
			for j := range sb[:n] {
				sb[j] = byte(1 + i&1)
			}
			if err := C.Barrier(ctx, c); err != nil {
				return 0, err
			}
		}
		t0 := time.Now()
		if err := call(); err != nil {
			return 0, err
		}
		if el := time.Since(t0); i >= skip {
			total += el
		}
		if !noData(k) {
			if err := C.Barrier(ctx, c); err != nil {
				return 0, err
			}
		}
	}
	return total.Seconds() * 1e6 / float64(iters), nil
}

// floats views b (a []byte from make, which Go aligns to 8 bytes) as
// len(b)/4 float32s, as OSU's reductions count size/4 floats.
func floats(b []byte) []float32 {
	if len(b) < 4 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

var collNames = []string{"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall"}

// nbNames are the nonblocking forms (OSU's osu_ibarrier, ...: the call
// started, then waited for, with no computation between), run only when
// -colls names them.
var nbNames = []string{"ibarrier", "ibcast", "ireduce", "iallreduce", "iallgather", "ialltoall"}

// noData reports whether collective k moves no data (the barriers: one
// size, 0, and no barrier after each call).
func noData(k string) bool { return k == "barrier" || k == "ibarrier" }

// rootOf splits a collective's name from its ":last" suffix, which roots
// Bcast and Reduce (and their nonblocking forms) at the last rank
// instead of rank 0.
func rootOf(k string) (name string, last bool) {
	name, last = strings.CutSuffix(k, ":last")
	return name, last
}

// rooted reports whether collective k takes a root.
func rooted(k string) bool {
	switch k {
	case "bcast", "reduce", "ibcast", "ireduce":
		return true
	}
	return false
}

func knownColl(k string) bool {
	k, last := rootOf(k)
	if last && !rooted(k) {
		return false
	}
	for _, n := range append(collNames[:len(collNames):len(collNames)], nbNames...) {
		if n == k {
			return true
		}
	}
	return false
}

// title is OSU's name of a collective in its headers.
func title(k string) string { return strings.ToUpper(k[:1]) + k[1:] }
