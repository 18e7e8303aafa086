package collectives_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// nbxTargets is the sparse pattern of TestSparseExchange: the ranks
// rank r sends to, which their receivers do not know.
func nbxTargets(r, p, round int) []int {
	var out []int
	for d := range p {
		if (r*7+d*13+round*5)%3 == 0 {
			out = append(out, d)
		}
	}
	return out
}

// sparseExchange is the NBX algorithm (a sparse exchange with no
// counts known in advance): synchronous sends to the targets; receive
// whatever arrives; once every send has been matched, an Ibarrier; done
// when it completes, at which point every message sent has been
// received. It returns the senders of the messages this rank received.
func sparseExchange(ctx context.Context, comm *endpoint.Comm, c *C.Coll, round int) ([]int, error) {
	// A tag per round: a rank that has finished this round may send the
	// next one's messages before this rank's Ibarrier completes.
	tag := 4242 + round
	me, p := comm.Rank(), comm.Size()
	var sends []*endpoint.Request
	for _, d := range nbxTargets(me, p, round) {
		msg := binary.LittleEndian.AppendUint32(nil, uint32(me))
		r, err := comm.Issend(msg, d, tag)
		if err != nil {
			return nil, err
		}
		sends = append(sends, r)
	}
	var from []int
	var barrier *C.Request
	for {
		m, ok, err := comm.Improbe(endpoint.AnySource, tag)
		if err != nil {
			return nil, err
		}
		if ok {
			b := make([]byte, 4)
			if _, err := m.Mrecv(ctx, b); err != nil {
				return nil, err
			}
			from = append(from, int(binary.LittleEndian.Uint32(b)))
		}
		if barrier == nil {
			done, err := endpoint.TestAll(sends...)
			if err != nil {
				return nil, err
			}
			if done {
				if barrier, err = C.Ibarrier(c); err != nil {
					return nil, err
				}
			}
		} else if done, err := barrier.Test(); err != nil || done {
			return from, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func checkSparse(me, p, round int, from []int) error {
	var want []int
	for s := range p {
		for _, d := range nbxTargets(s, p, round) {
			if d == me {
				want = append(want, s)
			}
		}
	}
	count := map[int]int{}
	for _, s := range from {
		count[s]++
	}
	for _, s := range want {
		count[s]--
	}
	for s, k := range count {
		if k != 0 {
			return fmt.Errorf("round %d, rank %d: %+d messages from rank %d (got %v, want %v)", round, me, k, s, from, want)
		}
	}
	return nil
}

// TestSparseExchange: the NBX idiom (Issend, matched probes, Ibarrier)
// over handles of one process and over processes: every rank receives
// exactly the messages sent to it, in several rounds back to back.
func TestSparseExchange(t *testing.T) {
	t.Run("handles", func(t *testing.T) {
		eps := handles(t, 4)
		ctx := eptest.Ctx(t, 30*time.Second)
		runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
			for round := range 5 {
				from, err := sparseExchange(ctx, c.Comm(), c, round)
				if err != nil {
					return err
				}
				if err := checkSparse(c.Rank(), c.Size(), round, from); err != nil {
					return err
				}
			}
			return nil
		})
	})
	t.Run("procs", func(t *testing.T) {
		if launchtest.RunOn(t, 4, "native", 60*time.Second) {
			return
		}
		w, ctx, c := worldColl(t)
		for round := range 5 {
			from, err := sparseExchange(ctx, w.Comm(), c, round)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkSparse(c.Rank(), c.Size(), round, from); err != nil {
				t.Fatal(err)
			}
		}
		if err := errors.Join(c.Free()); err != nil {
			t.Fatal(err)
		}
	})
}
