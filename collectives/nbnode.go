package collectives

import (
	"context"
	"fmt"
	"time"
)

// Nonblocking collectives between processes of one node, each holding
// one rank of the communicator, take the node level of the hierarchy
// as the blocking forms do (the node segment's steps, streams and
// single copies, hiernode.go) instead of the flat algorithms' messages.
// The blocking form runs as the call's coroutine (nonblocking.go), and
// every wait of the node level (hierSpin) polls its condition there,
// handing control back to the driver after each poll that fails.
//
// The node level runs one call at a time, in call order, on every
// process: a call takes a ticket when it starts (hierReady, on the
// goroutine that starts the handle's calls, in their order) and runs its
// node steps once the calls before it have finished theirs (turn). A
// blocking call that finds no nonblocking one holding or awaiting the
// node level takes none.

// nodeNB returns the hierarchy the clones of handle c run their
// nonblocking calls through: c's own where its communicator's ranks are
// processes of one node with a node level, one rank each; nil (flat)
// otherwise. Every rank gives the same answer.
func (c *Coll) nodeNB() *hier {
	h := c.hier
	if h == nil || h.chunk == 0 || h.tops != 1 || h.procs != c.size || h.ng == nil {
		return nil
	}
	return h
}

// nodeTurn takes this call's ticket for the node level and waits for its
// turn: until every call started before it on this handle has finished
// its node steps. A blocking call drives the handle's outstanding
// collectives meanwhile; a nonblocking one waits as a round.
func (c *Coll) nodeTurn(ctx context.Context, ng *nodeGroup) error {
	t := ng.tickets
	ng.tickets++
	c.ticket = t + 1
	if ng.turn.Load() == t {
		return nil
	}
	if c.own != nil {
		return c.nbSpin(func() (bool, error) {
			if ng.turn.Load() == t {
				return true, nil
			}
			return false, ng.failed()
		})
	}
	h := c.handle()
	done := ctx.Done()
	for spins := 1; ; spins++ {
		if ng.turn.Load() == t {
			return nil
		}
		if err := ng.failed(); err != nil {
			return err
		}
		if spins%pollClock == 0 {
			select {
			case <-done:
				return fmt.Errorf("waiting for the nonblocking collectives before this one: %w", ctx.Err())
			default:
			}
		}
		h.tryAdvance()
		c.pause(spins)
	}
}

// endTurn hands the node level to the next call, if this one holds it
// (a call that failed before its turn came leaves the node group failed,
// which ends the later calls' waits).
func (c *Coll) endTurn() {
	t := c.ticket - 1
	c.ticket = 0
	c.hier.ng.turn.CompareAndSwap(t, t+1)
}

// nbSpin is hierSpin in a nonblocking call's coroutine: while cond does
// not hold, the call hands control back to its driver after each poll
// (stalled from the second poll on, so that the driver sees the call
// has not moved), and from
// time to time (firstCheck, then at doubling intervals) checks the other
// ranks as hierSpin does. The coroutine polls cond itself: handed to the
// driver as the round's condition, every caller's closure would escape
// to the heap, in the blocking forms too.
func (c *Coll) nbSpin(cond func() (bool, error)) error {
	var t0 time.Time
	next := firstCheck
	for polls := 1; ; polls++ {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		if polls%pollClock == 0 {
			if t0.IsZero() {
				t0 = time.Now()
			} else if el := time.Since(t0); el >= next {
				next = el + min(el, maxCheck)
				if err := c.hierCheck(); err != nil {
					// A peer that did its part may have left meanwhile.
					if ok, _ := cond(); ok {
						return nil
					}
					return err
				}
			}
		}
		c.stalled = polls > 1
		more := c.nb.w.yield(false)
		c.stalled = false
		if !more {
			return errStopped
		}
	}
}
