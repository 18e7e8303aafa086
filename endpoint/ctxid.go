package endpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Context ids. A new communicator's id must be free in every process of
// its ranks, so its ranks agree on it: each contributes its process's
// bitmap of used ids and the lowest id free in all of them wins. The
// handles and goroutines of one process may create communicators from
// different parents at the same time, and two such creations can both
// see an id free and both pick it; so an agreement has two rounds. In
// the first every rank reserves the candidate in its process, which
// fails where another creation of the process reserved or holds it;
// the second tells every rank whether all reservations held. If one
// failed, every rank drops its reservation and the creation tries again
// with fresh bitmaps (which now show the other creation's id). The
// handles of one process that are ranks of the same creation share its
// reservation: a ctxKey names the creation.

// ctxKey names a communicator creation within a process alike on every
// handle that takes part: the parent's context id and, for creations
// collective over part of the parent (CreateGroup), what tells them
// apart; an IntercommCreate, whose two groups have different parents,
// has parent -1 and a hash of both groups and the tag.
type ctxKey struct {
	parent int
	sub    uint64
}

// maxCtxAttempts bounds an agreement's retries; reached only if
// creations collide without end.
const maxCtxAttempts = 1000

// contextMask is this process's bitmap of used context ids.
func (w *World) contextMask() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]byte, 0, len(w.ctxUsed)*8)
	for _, u := range w.ctxUsed {
		out = binary.LittleEndian.AppendUint64(out, u)
	}
	return out
}

// lowestFree returns the lowest context id free in every mask (each
// maxContexts/8 bytes, as contextMask makes them).
func lowestFree(masks ...[]byte) (int, error) {
	for i := 0; i < maxContexts/8; i += 8 {
		var u uint64
		for _, m := range masks {
			u |= binary.LittleEndian.Uint64(m[i:])
		}
		if u != ^uint64(0) {
			return i*8 + bits.TrailingZeros64(^u), nil
		}
	}
	return 0, fmt.Errorf("all %d context ids in use", maxContexts)
}

// reserve takes a reference to context id for creation key and reports
// whether it could: the id is free in this process, or reserved by the
// same creation (another handle of it); not where another creation
// reserved or holds it.
func (w *World) reserve(id int, key ctxKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctxUsed[id/64]&(1<<(id%64)) != 0 {
		if k, ok := w.ctxHeld[id]; !ok || k != key {
			return false
		}
	} else {
		w.ctxUsed[id/64] |= 1 << (id % 64)
		w.ctxHeld[id] = key
	}
	w.ctxRefs[id]++
	return true
}

// settled marks id, agreed by every rank of its creation, as no longer
// reserved: the communicator holds it.
func (w *World) settled(id int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.ctxHeld, id)
}

// ctxQuarantine is how many freed context ids a process keeps from reuse.
// A message sent on a communicator before its receiver freed it can
// arrive after the Free (it was still in a ring or in the provider):
// while its id is quarantined it is dropped on arrival, where it could
// otherwise match a receive of the next communicator given that id. An
// id is reused after ctxQuarantine later frees in its process, out of
// maxContexts ids.
const ctxQuarantine = 256

// freeContext drops one reference to the context id of a freed
// communicator and reports whether it was the last one. The id then
// enters the quarantine (still used in this process's mask; ctxFreed,
// by which the endpoints drop its late messages), and the oldest
// quarantined id beyond ctxQuarantine becomes free.
func (w *World) freeContext(id int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.unrefLocked(id) {
		return false
	}
	w.ctxFreed[id/64].Or(1 << (id % 64))
	w.ctxQuar = append(w.ctxQuar, id)
	if len(w.ctxQuar) > ctxQuarantine {
		old := w.ctxQuar[0]
		w.ctxQuar = append(w.ctxQuar[:0], w.ctxQuar[1:]...)
		w.ctxFreed[old/64].And(^uint64(1 << (old % 64)))
		w.ctxUsed[old/64] &^= 1 << (old % 64)
	}
	return true
}

// ctxBitmap is a set of context ids read without a lock.
type ctxBitmap [maxContexts / 64]atomic.Uint64

// has reports whether id is in b.
func (b *ctxBitmap) has(id int) bool { return b[id/64].Load()&(1<<(id%64)) != 0 }

// releaseContext drops one reference to context id and reports whether
// it was the last one (the id is free again): for a creation that did
// not complete, whose id carried no message.
func (w *World) releaseContext(id int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.unrefLocked(id) {
		return false
	}
	w.ctxUsed[id/64] &^= 1 << (id % 64)
	return true
}

// unrefLocked drops one reference to context id and reports whether it
// was the last one, forgetting the id's references and reservation then.
// w.mu is held.
func (w *World) unrefLocked(id int) bool {
	w.ctxRefs[id]--
	if w.ctxRefs[id] > 0 {
		return false
	}
	delete(w.ctxRefs, id)
	delete(w.ctxHeld, id)
	return true
}

// takeContext reserves the lowest context id free in every mask where
// no other creation can be under way (an intercommunicator's groups
// agree through their leaders; see interAgree); key names the creation.
func (w *World) takeContext(key ctxKey, masks ...[]byte) (int, bool, error) {
	id, err := lowestFree(masks...)
	if err != nil {
		return 0, false, err
	}
	return id, w.reserve(id, key), nil
}

// ctxBackoff waits before attempt n+1 of an agreement, a random while
// that grows with n, so that two creations that keep colliding part.
func ctxBackoff(ctx context.Context, n int) error {
	d := time.Duration(rand.IntN(1<<min(n, 10))) * time.Microsecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// allocContext agrees on a context id with every rank of c (collective
// over c's collective context) for a communicator made from c, and
// returns it with the extra payloads the ranks gathered (those of the
// attempt that succeeded).
func (c *Comm) allocContext(ctx context.Context, extra []byte) (int, [][]byte, error) {
	return c.agreeContext(ctx, ctxKey{parent: c.id}, extra, tagGatherLen, tagGatherData)
}

// agreeContext is allocContext for creation key, with the exchange's
// tags on the collective context (allgather's).
func (c *Comm) agreeContext(ctx context.Context, key ctxKey, extra []byte, lenTag, dataTag int) (int, [][]byte, error) {
	const n = maxContexts / 8 // a mask's bytes
	for attempt := 0; ; attempt++ {
		all, err := c.allgather(ctx, append(c.w.contextMask(), extra...), lenTag, dataTag)
		if err != nil {
			return 0, nil, fmt.Errorf("endpoint: agree on a context id: %w", err)
		}
		masks, extras := make([][]byte, len(all)), make([][]byte, len(all))
		for r, b := range all {
			if len(b) < n {
				return 0, nil, fmt.Errorf("endpoint: context mask of rank %d is %d bytes: %w", r, len(b), ErrInvalid)
			}
			masks[r], extras[r] = b[:n], b[n:]
		}
		id, err := lowestFree(masks...)
		if err != nil {
			return 0, nil, fmt.Errorf("endpoint: %w", err)
		}
		held := c.w.reserve(id, key)
		ok := []byte{0}
		if held {
			ok[0] = 1
		}
		oks, err := c.allgather(ctx, ok, lenTag, dataTag)
		if err == nil && len(oks) != c.size {
			err = fmt.Errorf("%d answers from %d ranks: %w", len(oks), c.size, ErrInvalid)
		}
		all1 := err == nil
		for _, o := range oks {
			all1 = all1 && len(o) == 1 && o[0] == 1
		}
		if all1 {
			c.w.settled(id)
			return id, extras, nil
		}
		if held {
			c.w.releaseContext(id)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("endpoint: agree on a context id: %w", err)
		}
		if attempt+1 >= maxCtxAttempts {
			return 0, nil, fmt.Errorf("endpoint: no context id agreed in %d attempts (communicators created at once in a process keep colliding): %w", maxCtxAttempts, ErrInvalid)
		}
		if err := ctxBackoff(ctx, attempt); err != nil {
			return 0, nil, fmt.Errorf("endpoint: agree on a context id: %w", err)
		}
	}
}
