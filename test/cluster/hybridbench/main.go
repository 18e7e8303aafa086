// Command hybridbench measures whether a hybrid job (ranks on several
// nodes) keeps same-node latency and bandwidth where a one-node job has
// them, and whether a rank's traffic to another node slows its traffic to
// a same-node peer.
//
// Every process creates two private endpoints (Comm.CreateEndpoints(2)):
// handle 0 of processes 0 and 1 ping-pongs messages of each size, handle 1
// carries the background stream. The phases, each between two world
// barriers:
//
//   - idle: processes 0 and 1 ping-pong; the others wait, sleeping
//     between polls (on real nodes their cores are their own);
//   - busy (when process 2 is on another node): the same ping-pong while process
//     0 streams 1 MiB messages from its second endpoint to process 2's
//     second endpoint, one after another, until the ping-pong is done.
//
// Process 1 must share process 0's node and, in a busy phase, process 2
// must not: the program checks the transports (node for the ping-pong,
// or libfabric under WEFT_NODE_TRANSPORT=fabric; libfabric for the
// stream) and fails otherwise. Process 0 prints one line
// per phase and size:
//
//	bench LABEL PHASE SIZE half_rtt_us MB/s
//
// with the median over the repetitions of the mean half round trip, and,
// for a busy phase, "stream LABEL MB/s" (the stream's own rate). LABEL is
// WEFT_BENCH_LABEL (default "job"). WEFT_BENCH_SIZES (comma-separated
// bytes) and WEFT_BENCH_REPS override the sizes and repetitions (7, after
// one warm-up), WEFT_BENCH_ITERS caps the round trips per repetition (200
// up to 4 KiB, 50 up to 64 KiB, 10 above). It runs
// under fabrun; docs/cluster-testing.md gives the command.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

const (
	tagPing   = 1
	tagStream = 2
	tagDone   = 3
	streamLen = 1 << 20
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hybridbench: %v\n", err)
		os.Exit(1)
	}
	c := w.Comm()
	if err := run(ctx, c); err != nil {
		fmt.Fprintf(os.Stderr, "hybridbench: rank %d: %v\n", c.Rank(), err)
		w.Job().Abort(1, err.Error())
		os.Exit(1)
	}
	if err := w.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "hybridbench: rank %d: close: %v\n", c.Rank(), err)
		os.Exit(1)
	}
}

// settings reads the sizes and repetitions.
func settings() ([]int, int, error) {
	sizes := []int{8, 4 << 10, 64 << 10, 1 << 20}
	reps := 7
	if s := os.Getenv("WEFT_BENCH_SIZES"); s != "" {
		sizes = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 64<<20 {
				return nil, 0, fmt.Errorf("WEFT_BENCH_SIZES: bad size %q", f)
			}
			sizes = append(sizes, n)
		}
	}
	if s := os.Getenv("WEFT_BENCH_REPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, 0, fmt.Errorf("WEFT_BENCH_REPS: bad count %q", s)
		}
		reps = n
	}
	return sizes, reps, nil
}

// iters is the round trips per repetition: fewer for large messages, and
// at most WEFT_BENCH_ITERS when that is set.
func iters(size int) int {
	if n, err := strconv.Atoi(os.Getenv("WEFT_BENCH_ITERS")); err == nil && n > 0 {
		return min(n, itersFor(size))
	}
	return itersFor(size)
}

func itersFor(size int) int {
	switch {
	case size <= 4<<10:
		return 200
	case size <= 64<<10:
		return 50
	default:
		return 10
	}
}

func run(ctx context.Context, c *endpoint.Comm) error {
	sizes, reps, err := settings()
	if err != nil {
		return err
	}
	rank, size := c.Rank(), c.Size()
	if size < 2 {
		return errors.New("needs 2 or more processes")
	}
	label := os.Getenv("WEFT_BENCH_LABEL")
	if label == "" {
		label = "job"
	}
	hs, err := c.CreateEndpoints(ctx, 2)
	if err != nil {
		return fmt.Errorf("create endpoints: %w", err)
	}
	defer func() {
		for _, h := range hs {
			h.Free()
		}
	}()
	pp, st := hs[0], hs[1]
	// Process p's handles are ranks 2p and 2p+1 of the new communicator.
	if rank <= 1 {
		// WEFT_NODE_TRANSPORT=fabric puts same-node peers on libfabric.
		want := endpoint.TransportNode
		if os.Getenv("WEFT_NODE_TRANSPORT") == "fabric" {
			want = endpoint.TransportFabric
		}
		if tr, err := pp.Transport(2 * (1 - rank)); err != nil || tr != want {
			return fmt.Errorf("ping-pong peer transport %q (%v), want %s: processes 0 and 1 must share a node", tr, err, want)
		}
	}
	host, _ := os.Hostname()
	hosts, err := c.Allgather(ctx, []byte(host))
	if err != nil {
		return fmt.Errorf("allgather host names: %w", err)
	}
	phases := []string{"idle"}
	if size >= 3 && string(hosts[2]) != string(hosts[0]) {
		phases = append(phases, "busy")
		if rank == 0 {
			if tr, err := st.Transport(5); err != nil || tr != endpoint.TransportFabric {
				return fmt.Errorf("stream peer transport %q (%v), want %s: process 2 must be on another node", tr, err, endpoint.TransportFabric)
			}
		}
	}
	for _, phase := range phases {
		for _, n := range sizes {
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			busy := phase == "busy"
			var stream chan streamResult
			var stop atomic.Bool
			switch {
			case busy && rank == 0:
				stream = make(chan streamResult, 1)
				started := make(chan struct{})
				go func() { stream <- sendStream(ctx, st, &stop, started) }()
				select {
				case <-started:
				case r := <-stream:
					return fmt.Errorf("stream: %w", r.err)
				}
			case busy && rank == 2:
				if err := recvStream(ctx, st); err != nil {
					return fmt.Errorf("stream receive: %w", err)
				}
			case rank >= 2:
				if err := await(ctx, c); err != nil {
					return err
				}
			}
			if rank <= 1 {
				half, err := pingPong(ctx, pp, rank, n, reps)
				if err != nil {
					stop.Store(true)
					return fmt.Errorf("ping-pong %d B: %w", n, err)
				}
				if rank == 0 {
					fmt.Printf("bench %s %s %d %.2f %.1f\n", label, phase, n, half, float64(n)/half)
				}
			}
			if stream != nil {
				stop.Store(true)
				r := <-stream
				if r.err != nil {
					return fmt.Errorf("stream: %w", r.err)
				}
				fmt.Printf("stream %s %d %.1f\n", label, n, float64(r.bytes)/r.took.Seconds()/1e6)
			}
			if rank == 0 {
				for t := 2; t < size; t++ {
					if busy && t == 2 {
						continue
					}
					if err := c.Send(ctx, nil, t, tagDone); err != nil {
						return fmt.Errorf("done to %d: %w", t, err)
					}
				}
			}
		}
	}
	return c.Barrier(ctx)
}

// pingPong runs reps repetitions of iters(n) round trips between handle
// ranks 0 and 2 and returns (on rank 0) the median over the repetitions of
// the mean half round trip in µs. The first repetition is a warm-up.
func pingPong(ctx context.Context, pp *endpoint.Comm, rank, n, reps int) (float64, error) {
	buf := make([]byte, n)
	peer := 2 * (1 - rank)
	k := iters(n)
	var halves []float64
	for rep := range reps + 1 {
		t := time.Now()
		for range k {
			if rank == 0 {
				if err := pp.Send(ctx, buf, peer, tagPing); err != nil {
					return 0, err
				}
				if _, err := pp.Recv(ctx, buf, peer, tagPing); err != nil {
					return 0, err
				}
			} else {
				if _, err := pp.Recv(ctx, buf, peer, tagPing); err != nil {
					return 0, err
				}
				if err := pp.Send(ctx, buf, peer, tagPing); err != nil {
					return 0, err
				}
			}
		}
		if rep > 0 {
			halves = append(halves, float64(time.Since(t).Microseconds())/float64(2*k))
		}
	}
	slices.Sort(halves)
	return halves[len(halves)/2], nil
}

// await waits, without spinning, for rank 0's message that ends the
// phase: a process with nothing to do sleeps between polls, so that on an
// oversubscribed machine it leaves the cores to the ranks measured (on
// real nodes its cores are its own).
func await(ctx context.Context, c *endpoint.Comm) error {
	r, err := c.Irecv(nil, 0, tagDone)
	if err != nil {
		return err
	}
	for {
		done, _, err := r.Test()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

type streamResult struct {
	bytes int
	took  time.Duration
	err   error
}

// sendStream sends 1 MiB messages from handle rank 1 to handle rank 5
// until stop is set (after the first one has arrived, it closes started);
// the last message's first byte is 0, the others' 1.
func sendStream(ctx context.Context, st *endpoint.Comm, stop *atomic.Bool, started chan<- struct{}) streamResult {
	buf := make([]byte, streamLen)
	var r streamResult
	t := time.Now()
	for {
		last := stop.Load()
		buf[0] = 1
		if last {
			buf[0] = 0
		}
		if r.err = st.Send(ctx, buf, 5, tagStream); r.err != nil {
			return r
		}
		if started != nil {
			close(started)
			started = nil
		}
		if last {
			r.took = time.Since(t)
			return r
		}
		r.bytes += streamLen
	}
}

// recvStream receives sendStream's messages until the last one.
func recvStream(ctx context.Context, st *endpoint.Comm) error {
	buf := make([]byte, streamLen)
	for {
		if _, err := st.Recv(ctx, buf, 1, tagStream); err != nil {
			return err
		}
		if buf[0] == 0 {
			return nil
		}
	}
}
