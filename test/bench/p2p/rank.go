package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/test/bench/internal/eploop"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// rankMain is one rank of a weft job (-role), the counterpart of the MPI
// programs with the same arguments and output:
//
//	-role pingpong ITERS WARMUP SIZE...
//	-role msgrate WINDOW WINDOWS WARMUP SIZE HANDLES BATCH
//
// HANDLES is the number of endpoint handles (and goroutines) per process;
// BATCH 1 starts each window's sends with one IsendBatch.
func rankMain(role string, args []string, stdout io.Writer) error {
	nums, err := sidebyside.RoleArgs(role, args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	switch role {
	case "pingpong":
		if len(nums) < 3 || nums[0] < 1 {
			return fmt.Errorf("%w: -role pingpong ITERS WARMUP SIZE... (ITERS ≥ 1)", sidebyside.ErrUsage)
		}
		return rankPingpong(ctx, nums[0], nums[1], nums[2:], stdout)
	case "msgrate":
		if len(nums) != 6 || nums[0] < 1 || nums[1] < 1 || nums[4] < 1 || nums[5] > 1 {
			return fmt.Errorf("%w: -role msgrate WINDOW WINDOWS WARMUP SIZE HANDLES BATCH (WINDOW, WINDOWS, HANDLES ≥ 1; BATCH 0 or 1)", sidebyside.ErrUsage)
		}
		return rankMsgrate(ctx, nums[0], nums[1], nums[2], nums[3], nums[4], nums[5] == 1, stdout)
	}
	return fmt.Errorf("%w: -role %q: want pingpong or msgrate", sidebyside.ErrUsage, role)
}

// rankPingpong: two ranks, each on a private endpoint handle
// (CreateEndpoints(1)); per size a barrier, warmup untimed round trips and
// iters timed ones with blocking Send and Recv. Rank 0 prints the half
// round trip and the bandwidth.
func rankPingpong(ctx context.Context, iters, warmup int, sizes []int, stdout io.Writer) error {
	c, done, err := eploop.Pair(ctx, "ping-pong")
	if err != nil {
		return err
	}
	defer done()
	me := c.Rank()
	maxSize := 0
	for _, s := range sizes {
		maxSize = max(maxSize, s)
	}
	sb, rb := make([]byte, maxSize), make([]byte, maxSize)
	if os.Getenv(envBufs) == "thp" {
		var err error
		if sb, err = thpBuf(maxSize); err != nil {
			return err
		}
		if rb, err = thpBuf(maxSize); err != nil {
			return err
		}
	}
	for i := range sb {
		sb[i] = byte(i%251 + 1)
	}
	for _, size := range sizes {
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if _, err := eploop.PingPong(ctx, c, 1-me, me == 0, sb[:size], rb[:size], warmup); err != nil {
			return err
		}
		el, err := eploop.PingPong(ctx, c, 1-me, me == 0, sb[:size], rb[:size], iters)
		if err != nil {
			return err
		}
		if size > 0 && rb[size-1] != sb[size-1] {
			return fmt.Errorf("rank %d: payload of %d bytes not received", me, size)
		}
		if me == 0 {
			half := el.Seconds() * 1e6 / float64(2*iters)
			fmt.Fprintf(stdout, "RESULT lat %d %.4f\nRESULT bw %d %.4f\n", size, half, size, float64(size)/half)
		}
	}
	return nil
}

// envBufs set to thp makes the ping-pong ranks take their buffers from
// thpBuf instead of the Go heap (-weft native+thp).
const envBufs = "WEFT_P2P_BUFS"

// thpBuf maps n bytes (rounded up to 2 MiB) advised MADV_HUGEPAGE, so
// that the kernel backs them with transparent huge pages where its
// setting is madvise or always; the mapping lives as long as the process.
func thpBuf(n int) ([]byte, error) {
	const huge = 2 << 20
	sz := (n + huge - 1) / huge * huge
	b, err := unix.Mmap(-1, 0, sz+huge, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", sz+huge, err)
	}
	off := (huge - int(uintptr(unsafe.Pointer(&b[0]))%huge)) % huge
	b = b[off : off+sz]
	if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
		return nil, fmt.Errorf("madvise(MADV_HUGEPAGE): %w", err)
	}
	return b[:n], nil
}

// rankMsgrate: every process opens handles endpoint handles and drives each
// from a goroutine of its own. Of the job's ranks (processes × handles,
// numbered in process order) the first half send and the second half
// receive, rank i to rank i + half, in windows (eploop.Stream) closed by a
// zero-byte acknowledgement. After warmup untimed windows every goroutine
// waits; a barrier of the processes starts the clock, a second one stops
// it, and world rank 0 prints the messages of all pairs per second.
func rankMsgrate(ctx context.Context, window, windows, warmup, size, handles int, batch bool, stdout io.Writer) error {
	w, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	world := w.Comm()
	ranks := world.Size() * handles
	if ranks%2 != 0 {
		return fmt.Errorf("message rate needs an even number of ranks, got %d processes × %d handles", world.Size(), handles)
	}
	eps, err := world.CreateEndpoints(ctx, handles)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range eps {
			c.Free()
		}
	}()
	pairs := ranks / 2
	// On an error the other goroutines are cancelled and waited for
	// before the handles are freed.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, handles)
	for h, c := range eps {
		r := c.Rank()
		peer := r + pairs
		if r >= pairs {
			peer = r - pairs
		}
		st := eploop.NewStream(c, peer, r < pairs, window, size, 0)
		st.Batch = batch
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			sidebyside.WarmCore()
			var err error
			for range warmup {
				if err = st.Window(ctx); err != nil {
					break
				}
			}
			errs[h] = err
			ready.Done()
			if err != nil {
				return
			}
			select {
			case <-start:
			case <-ctx.Done():
				errs[h] = ctx.Err()
				return
			}
			for range windows {
				if err := st.Window(ctx); err != nil {
					errs[h] = err
					return
				}
			}
		}()
	}
	failed := func() error {
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	ready.Wait()
	if err := failed(); err != nil {
		cancel()
		done.Wait()
		return err
	}
	if err := world.Barrier(ctx); err != nil {
		cancel()
		done.Wait()
		return err
	}
	t0 := time.Now()
	close(start)
	done.Wait()
	if err := failed(); err != nil {
		return err
	}
	if err := world.Barrier(ctx); err != nil {
		return err
	}
	el := time.Since(t0)
	if world.Rank() == 0 {
		fmt.Fprintf(stdout, "RESULT msgrate %d %.1f\n", size, float64(pairs*window*windows)/el.Seconds())
	}
	return nil
}
