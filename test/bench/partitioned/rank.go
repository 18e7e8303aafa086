package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/test/bench/internal/eploop"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// rankMain is one rank of the weft job (-role rank ITERS WARMUP PARTS
// SIZE...), the counterpart of mpi/partitioned.c with the same rounds and
// output, on a private endpoint handle per rank.
func rankMain(role string, args []string, stdout io.Writer) error {
	nums, err := sidebyside.RoleArgs(role, args)
	if err != nil {
		return err
	}
	if role != "rank" || len(nums) < 4 || nums[0] < 1 || nums[2] < 1 {
		return fmt.Errorf("%w: -role rank ITERS WARMUP PARTS SIZE... (ITERS, PARTS ≥ 1)", sidebyside.ErrUsage)
	}
	iters, warmup, parts := nums[0], nums[1], nums[2]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, done, err := eploop.Pair(ctx, "partitioned")
	if err != nil {
		return err
	}
	defer done()
	me, peer := c.Rank(), 1-c.Rank()
	for _, size := range nums[3:] {
		if size%parts != 0 {
			return fmt.Errorf("%w: size %d is not a multiple of %d partitions", sidebyside.ErrUsage, size, parts)
		}
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = byte(me + 1)
		}
		var p *endpoint.Partitioned
		if me == 0 {
			p, err = c.PsendInit(buf, parts, peer, 3)
		} else {
			p, err = c.PrecvInit(buf, parts, peer, 3)
		}
		if err != nil {
			return err
		}
		var took [2]float64 // each partition marked apart; all by one PreadyRange
		for mode := range took {
			took[mode], err = rounds(ctx, c, iters, warmup, func() error {
				if err := p.Start(); err != nil {
					return err
				}
				switch {
				case me == 1:
				case mode == 1:
					if err := p.PreadyRange(0, parts-1); err != nil {
						return err
					}
				default:
					for i := range parts {
						if err := p.Pready(i); err != nil {
							return err
						}
					}
				}
				return p.Wait(ctx)
			})
			if err != nil {
				return fmt.Errorf("partitioned rounds of %d B: %w", size, err)
			}
		}
		if err := p.Free(); err != nil {
			return err
		}
		if size > 0 && me == 1 && buf[size-1] != 1 {
			return fmt.Errorf("%d bytes not received", size)
		}
		whole, err := rounds(ctx, c, iters, warmup, func() error {
			if me == 0 {
				return c.Send(ctx, buf, peer, 5)
			}
			_, err := c.Recv(ctx, buf, peer, 5)
			return err
		})
		if err != nil {
			return fmt.Errorf("whole rounds of %d B: %w", size, err)
		}
		if me == 0 {
			fmt.Fprintf(stdout, "RESULT part %d %d %.4f\n", size, parts, took[0])
			fmt.Fprintf(stdout, "RESULT range %d %d %.4f\n", size, parts, took[1])
			fmt.Fprintf(stdout, "RESULT whole %d 1 %.4f\n", size, whole)
		}
	}
	return nil
}

// rounds runs warmup untimed and iters timed rounds of move followed by
// the receiver's zero-byte answer, after a barrier, and returns the µs a
// timed round took.
func rounds(ctx context.Context, c *endpoint.Comm, iters, warmup int, move func() error) (float64, error) {
	if err := c.Barrier(ctx); err != nil {
		return 0, err
	}
	var start time.Time
	for k := range warmup + iters {
		if k == warmup {
			start = time.Now()
		}
		if err := move(); err != nil {
			return 0, err
		}
		var err error
		if c.Rank() == 0 {
			_, err = c.Recv(ctx, nil, 1, 4)
		} else {
			err = c.Send(ctx, nil, 0, 4)
		}
		if err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Microseconds()) / float64(iters), nil
}
