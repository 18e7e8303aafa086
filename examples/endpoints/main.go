// Command endpoints shows MPI-style endpoints in Go: every process creates
// several endpoints (ranks) and hands each to its own goroutine, which then
// communicates on it without sharing locks or queues with the others.
//
// Each endpoint passes a token around a ring of all endpoints of the job
// (so it crosses goroutines of one process and processes alike), then the
// endpoints agree on a global sum with Allgather.
//
//	fabrun -n 2 endpoints -eps 4        # 8 ranks on 2 processes
//	mpiexec.hydra -n 2 endpoints        # works under Hydra too
//	endpoints -eps 3                    # a singleton process with 3 ranks
//
// Flags (and environment): -eps (WEFT_EXAMPLE_EPS), -shared
// (WEFT_ENDPOINT_SHARED), -rounds, -timeout.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "endpoints:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	defEPs := 4
	if v, err := strconv.Atoi(os.Getenv("WEFT_EXAMPLE_EPS")); err == nil {
		defEPs = v
	}
	fs := flag.NewFlagSet("endpoints", flag.ContinueOnError)
	eps := fs.Int("eps", defEPs, "endpoints (goroutines) per process")
	shared := fs.Bool("shared", os.Getenv("WEFT_ENDPOINT_SHARED") == "1", "one shared, locked endpoint per process instead of private ones")
	rounds := fs.Int("rounds", 3, "times the token goes around the ring")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	handles, err := w.Comm().CreateEndpoints(ctx, *eps, endpoint.Shared(*shared))
	if err != nil {
		return err
	}
	// The first handle that fails cancels ctx: the others would otherwise
	// wait for its messages until the timeout.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	errs := make([]error, len(handles))
	lines := make([]string, len(handles))
	for i, ep := range handles {
		wg.Add(1)
		go func(i int, ep *endpoint.Comm) { // this goroutine owns ep
			defer wg.Done()
			lines[i], errs[i] = ring(ctx, ep, *rounds)
			if errs[i] != nil {
				stop(fmt.Errorf("handle %d (rank %d): %w", i, ep.Rank(), errs[i]))
			}
			ep.Free()
		}(i, ep)
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err // the first failure, not what it caused in the others
	}
	for i := range handles {
		fmt.Fprintln(out, lines[i])
	}
	return nil
}

// ring sends a counter around all ranks of c; every rank adds its rank.
func ring(ctx context.Context, c *endpoint.Comm, rounds int) (string, error) {
	me, n := c.Rank(), c.Size()
	next, prev := (me+1)%n, (me-1+n)%n
	tok := make([]int64, 1)
	for r := 0; r < rounds; r++ {
		if me == 0 {
			tok[0] = 0
			if err := endpoint.SendSlice(ctx, c, tok, next, r); err != nil {
				return "", err
			}
		}
		if _, err := endpoint.RecvSlice(ctx, c, tok, prev, r); err != nil {
			return "", err
		}
		tok[0] += int64(me)
		if me != 0 {
			if err := endpoint.SendSlice(ctx, c, tok, next, r); err != nil {
				return "", err
			}
		}
	}
	// rank 0 now holds the sum of all ranks (plus its own 0, added last);
	// everybody learns it through allgather.
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(tok[0]))
	all, err := c.Allgather(ctx, b[:])
	if err != nil {
		return "", err
	}
	sum := int64(binary.LittleEndian.Uint64(all[0]))
	if want := int64(n * (n - 1) / 2); sum != want {
		return "", fmt.Errorf("rank %d: ring sum %d, want %d", me, sum, want)
	}
	lr, ls := c.NodeLocal()
	return fmt.Sprintf("rank %d of %d (node-local %d of %d, shared=%v): ring sum %d ok", me, n, lr, ls, c.Shared(), sum), nil
}
