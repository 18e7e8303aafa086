// Command ephello is the start-up benchmark's weft program at the level an
// MPI hello works at: endpoint.Init (job, transports, address exchange), a
// token passed round the ring of ranks with Send and Recv, a barrier, one
// line printed, World.Close. On one node its ranks talk through the node
// transport and never load libfabric.
//
//	fabrun -n 4 ephello
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ephello:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	c := w.Comm()
	me, n := c.Rank(), c.Size()
	token := []byte{0}
	if n > 1 {
		if me == 0 {
			if err := c.Send(ctx, token, 1, 1); err != nil {
				return err
			}
			if _, err := c.Recv(ctx, token, n-1, 1); err != nil {
				return err
			}
		} else {
			if _, err := c.Recv(ctx, token, me-1, 1); err != nil {
				return err
			}
			token[0]++
			if err := c.Send(ctx, token, (me+1)%n, 1); err != nil {
				return err
			}
		}
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if me == 0 && int(token[0]) != max(n-1, 0) {
		return fmt.Errorf("token came back as %d, want %d", token[0], n-1)
	}
	fmt.Printf("rank %d of %d: ring ok\n", me, n)
	return nil
}
