package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/test/bench/internal/eploop"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// Handler ids of the weft job.
const (
	hPing = iota + 1
	hData
	hAck
)

// rankMain is one rank of the weft job (-role rank ITERS WARMUP WINDOW
// SIZE...), the counterpart of ucx/am.c with the same rounds and output,
// on an engine over a private endpoint handle per rank:
//
//	lat: rank 0 calls a handler on rank 1 with an 8-byte header, which
//	     replies with 8 bytes (one round trip); also the same round trip
//	     as a plain endpoint ping-pong of 8 bytes (p2p), for scale;
//	rate: windows of WINDOW sends of an 8-byte header, rank 1's handler
//	     counting them, then an acknowledgement;
//	ratebatch: the same on an engine that batches small messages
//	     (am.WithAggregation(8192)): a window leaves in one or two
//	     messages when rank 0 polls for the acknowledgement;
//	bw SIZE: the same with SIZE bytes of payload, a window started by
//	     Isends and completed by their Waits, which rank 1's handler
//	     receives into its own buffer (ReadPayload).
func rankMain(role string, args []string, stdout io.Writer) error {
	nums, err := sidebyside.RoleArgs(role, args)
	if err != nil {
		return err
	}
	if role != "rank" || len(nums) < 3 || nums[0] < 1 || nums[2] < 1 {
		return fmt.Errorf("%w: -role rank ITERS WARMUP WINDOW SIZE... (ITERS, WINDOW ≥ 1)", sidebyside.ErrUsage)
	}
	iters, warmup, window := nums[0], nums[1], nums[2]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, done, err := eploop.Pair(ctx, "am")
	if err != nil {
		return err
	}
	defer done()
	e, err := am.Open(ctx, c)
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	me := e.Rank()
	maxSize := 8
	for _, s := range nums[3:] {
		maxSize = max(maxSize, s)
	}
	rbuf, sbuf, hdr := make([]byte, maxSize), make([]byte, maxSize), make([]byte, 8)
	// eb batches small messages (am.WithAggregation), for the batched
	// rate pass.
	eb, err := am.Open(ctx, c, am.WithAggregation(8192))
	if err != nil {
		return err
	}
	defer eb.Close(ctx)
	var got int
	for _, x := range []*am.Engine{e, eb} {
		x.Register(hPing, func(ctx context.Context, m *am.Msg) error {
			got++
			return m.Reply(sbuf[:8])
		})
		x.Register(hData, func(ctx context.Context, m *am.Msg) error {
			got++
			if m.Len() > 0 {
				_, err := m.ReadPayload(rbuf)
				return err
			}
			return nil
		})
		x.Register(hAck, func(ctx context.Context, m *am.Msg) error { got++; return nil })
	}
	// await polls x until n messages have been handled here.
	await := func(x *am.Engine, n int) error {
		for got < n {
			if _, err := x.Poll(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	if err := e.Quiesce(ctx); err != nil {
		return err
	}

	// lat
	reply := make([]byte, 0, 8)
	var start time.Time
	for k := range warmup + iters {
		if k == warmup {
			start = time.Now()
		}
		if me == 0 {
			if reply, err = e.Call(ctx, 1, hPing, hdr, nil, reply); err != nil {
				return err
			}
		} else if err := await(e, k+1); err != nil {
			return err
		}
	}
	lat := time.Since(start)
	got = 0
	if err := e.Quiesce(ctx); err != nil {
		return err
	}
	pp, err := eploop.PingPong(ctx, c, 1-me, me == 0, sbuf[:8], rbuf[:8], warmup)
	if err == nil {
		pp, err = eploop.PingPong(ctx, c, 1-me, me == 0, sbuf[:8], rbuf[:8], iters)
	}
	if err != nil {
		return err
	}
	if me == 0 {
		fmt.Fprintf(stdout, "RESULT lat 8 %.4f\n", float64(lat.Nanoseconds())/float64(iters)/1e3)
		fmt.Fprintf(stdout, "RESULT p2p 8 %.4f\n", float64(pp.Nanoseconds())/float64(iters)/1e3)
	}

	// rate (size 0), then bw for each size: a window of Isends, then
	// their Waits
	var reqs []*am.Request
	type pass struct {
		x    *am.Engine
		size int
		kind string // rate, ratebatch, bw
	}
	passes := []pass{{e, 0, "rate"}, {eb, 0, "ratebatch"}}
	for _, size := range nums[3:] {
		passes = append(passes, pass{e, size, "bw"})
	}
	for _, p := range passes {
		x, size := p.x, p.size
		n := iters
		if p.kind == "bw" {
			n = iters/4 + 1
		}
		wins := n/window + 1
		warmW := wins/10 + 1
		if err := x.Quiesce(ctx); err != nil {
			return err
		}
		got = 0
		for w := range warmW + wins {
			if w == warmW {
				start = time.Now()
			}
			if me == 0 {
				reqs = reqs[:0]
				for range window {
					if size == 0 { // inline (or batched): complete at once
						if err := x.Send(ctx, 1, hData, hdr, nil); err != nil {
							return err
						}
						continue
					}
					q, err := x.Isend(1, hData, hdr, sbuf[:size])
					if err != nil {
						return err
					}
					reqs = append(reqs, q)
				}
				for _, q := range reqs {
					if err := q.Wait(ctx); err != nil {
						return err
					}
				}
				if err := await(x, w+1); err != nil {
					return err
				}
			} else {
				if err := await(x, (w+1)*window); err != nil {
					return err
				}
				if err := x.Send(ctx, 0, hAck, nil, nil); err != nil {
					return err
				}
				if err := x.Flush(); err != nil {
					return err
				}
			}
		}
		el := time.Since(start).Seconds()
		switch {
		case me != 0:
		case p.kind == "bw":
			fmt.Fprintf(stdout, "RESULT bw %d %.2f\n", size, float64(wins*window*size)/el/1e6)
		default:
			fmt.Fprintf(stdout, "RESULT %s 8 %.1f\n", p.kind, float64(wins*window)/el)
		}
	}
	return nil
}
