package collectives

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/weft-hpc/weft/internal/memcopy"
)

// Barrier returns once every rank of c has entered it (dissemination:
// ⌈log₂ p⌉ rounds of empty messages to rank+2^k).
func Barrier(ctx context.Context, c *Coll) error {
	if err := c.enter(callBarrier); err != nil {
		return err
	}
	if c.hierFor(CollBarrier, 0) {
		return hierBarrier(ctx, c)
	}
	if c.localNB(CollBarrier) {
		s := callSig{call: callBarrier, root: -1, alg: algLocal}
		if c.own.hier.procs > 1 {
			return c.runHybrid(s, nil, nil, func([]nbSlot) {},
				func(pn *Coll, _ []nbSlot) (*Request, error) { return Ibarrier(pn) }, func([]nbSlot) {})
		}
		return c.runLocal(s, nil, nil, noGive, func([]nbSlot) {})
	}
	if err := c.ready(ctx, callSig{call: callBarrier, root: -1, alg: Dissemination}); err != nil {
		return c.fail(err)
	}
	var err error
	for dist := 1; dist < c.size && err == nil; dist <<= 1 {
		err = c.sendrecv(ctx, nil, (c.rank+dist)%c.size, nil, (c.rank-dist+c.size)%c.size)
	}
	return c.done(err)
}

// Bcast copies root's buf into buf on every other rank; len(buf) must be
// the same on every rank. Small messages travel down a binomial tree;
// large ones are scattered in p blocks down the tree and gathered by every
// rank around a ring (ScatterAllgather), which moves about 2n bytes per
// rank instead of n·log₂ p at the root. Pipeline, chosen by a setting or
// a selection table, passes the message down a chain of the ranks in
// segments.
func Bcast[T any](ctx context.Context, c *Coll, buf []T, root int) error {
	if err := c.enter(callBcast); err != nil {
		return err
	}
	es, err := elemSize[T]()
	if err != nil {
		return c.fail(err)
	}
	if err := c.checkRoot(root); err != nil {
		return c.fail(err)
	}
	b := bytesOf(buf)
	if c.hierFor(CollBcast, 0) && !c.bcastPair(len(b)) {
		return hierBcast(ctx, c, b, root, callSig{call: callBcast, root: root, count: len(buf), esize: es})
	}
	if c.localNB(CollBcast) {
		s := callSig{call: callBcast, root: root, count: len(buf), esize: es, alg: algLocal}
		if h := c.own.hier; h.procs > 1 {
			src, proot := 0, h.procOf[root] // the member whose buffer the processes' Bcast fills or reads
			if proot == h.procOf[c.rank] {
				src = h.local[root]
			}
			return c.runHybrid(s, b, b, func([]nbSlot) {},
				func(pn *Coll, slots []nbSlot) (*Request, error) { return Ibcast(pn, slots[src].recv, proot) },
				func(slots []nbSlot) {
					for i, m := range slots {
						if i != src {
							memcopy.Copy(m.recv, slots[src].recv)
						}
					}
				})
		}
		return c.runLocal(s, b, b, fromRoot(c, len(b), 0, root), func(slots []nbSlot) { localBcast(slots, root) })
	}
	c.noteFlat(CollBcast)
	alg := c.cfg.pick(CollBcast, len(b), c.size)
	if err := c.ready(ctx, callSig{call: callBcast, root: root, count: len(buf), esize: es, alg: alg}); err != nil {
		return c.fail(err)
	}
	return c.done(c.bcast(ctx, b, root, alg))
}

func (c *Coll) checkRoot(root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("root %d outside 0..%d: %w", root, c.size-1, ErrInvalid)
	}
	return nil
}

func (c *Coll) bcast(ctx context.Context, b []byte, root int, alg Algorithm) error {
	if c.size == 1 {
		return nil
	}
	switch alg {
	case Linear:
		if c.rank != root {
			if err := c.recv(b, root); err != nil {
				return err
			}
			return c.wait(ctx)
		}
		for i := 1; i < c.size; i++ {
			if err := c.send(b, (root+i)%c.size); err != nil {
				return err
			}
		}
		return c.wait(ctx)
	case ScatterAllgather:
		return c.bcastScatterAllgather(ctx, b, root)
	case Pipeline:
		return c.bcastPipeline(ctx, b, root)
	}
	return c.bcastBinomial(ctx, b, root)
}

// bcastBinomial: in ranks relative to the root, rank v receives from
// v - 2^k (2^k its lowest set bit) and sends to v + 2^j for every j < k.
func (c *Coll) bcastBinomial(ctx context.Context, b []byte, root int) error {
	p := c.size
	v := (c.rank - root + p) % p
	mask := 1
	for ; mask < p; mask <<= 1 {
		if v&mask != 0 {
			if err := c.recv(b, (v-mask+root)%p); err != nil {
				return err
			}
			if err := c.wait(ctx); err != nil {
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if v+mask < p {
			if err := c.send(b, (v+mask+root)%p); err != nil {
				return err
			}
		}
	}
	return c.wait(ctx)
}

// pipeSeg is the segment size of the pipelined Bcast: about the best
// segment of its cost model, √(nα/((p-2)β)), for a few MiB over a few
// ranks of a network (α 2 µs, 10 GB/s), and the node transport's slot.
// Smaller segments pay a message's cost each: between 3 and 4 processes
// of one node, 1–16 MiB took 0.3–0.8 of the time at 256 KiB segments
// that they took at 16 KiB (docs/perf/collectives.md). On one node the
// pipeline does not beat the binomial tree or the scatter and ring, so
// Auto does not pick it; a selection table does where a tuning run
// measures it faster.
const pipeSeg = 256 << 10

// bcastPipeline passes b down the chain of ranks relative to the root
// (0 → 1 → … → p-1) in segments of about pipeSeg bytes: each rank in
// the chain forwards segment s to its successor while it receives
// segment s+1 from its predecessor, so a large message takes about one
// message time plus (p-2) segment times instead of log₂ p message times.
// Messages between two ranks keep their order, so the segments match in
// turn.
func (c *Coll) bcastPipeline(ctx context.Context, b []byte, root int) error {
	p, n := c.size, len(b)
	v := (c.rank - root + p) % p
	prev, next := (c.rank-1+p)%p, (c.rank+1)%p
	k := max((n+pipeSeg-1)/pipeSeg, 1)
	seg := func(s int) []byte { return b[part(n, k, s):part(n, k, s+1)] }
	switch v {
	case 0:
		for s := range k {
			if err := c.send(seg(s), next); err != nil {
				return err
			}
		}
		return c.wait(ctx)
	case p - 1:
		for s := range k {
			if err := c.recv(seg(s), prev); err != nil {
				return err
			}
		}
		return c.wait(ctx)
	}
	if err := c.recv(seg(0), prev); err != nil {
		return err
	}
	if err := c.wait(ctx); err != nil {
		return err
	}
	for s := range k {
		if s+1 < k {
			if err := c.recv(seg(s+1), prev); err != nil {
				return err
			}
		}
		if err := c.send(seg(s), next); err != nil {
			return err
		}
		if err := c.wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// part returns where block i starts when n items are cut into p blocks
// whose sizes differ by at most one (the first n%p get one more);
// part(n, p, p) == n.
func part(n, p, i int) int { return i*(n/p) + min(i, n%p) }

// bcastScatterAllgather cuts b into p blocks, block v for relative rank
// v: the root scatters them down the binomial tree (each rank receives
// the blocks of its subtree), then every rank passes blocks around the
// ring until each holds all.
func (c *Coll) bcastScatterAllgather(ctx context.Context, b []byte, root int) error {
	p, n := c.size, len(b)
	v := (c.rank - root + p) % p
	blocks := func(i, j int) []byte { return b[part(n, p, i):part(n, p, j)] }
	mask := 1
	for ; mask < p; mask <<= 1 {
		if v&mask != 0 {
			if err := c.recv(blocks(v, min(v+mask, p)), (v-mask+root)%p); err != nil {
				return err
			}
			if err := c.wait(ctx); err != nil {
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if v+mask < p {
			if err := c.send(blocks(v+mask, min(v+2*mask, p)), (v+mask+root)%p); err != nil {
				return err
			}
		}
	}
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.ringAllgather(ctx, b, func(i int) int { return part(n, p, i) }, root)
}

// ringAllgather completes b, cut into p blocks (block i is
// b[off(i):off(i+1)]) of which rank (i+shift)%p holds block i: in p-1
// steps each rank sends the block it got last to its right neighbour and
// receives the next from its left.
func (c *Coll) ringAllgather(ctx context.Context, b []byte, off func(int) int, shift int) error {
	return c.ringAllgatherFrom(ctx, b, off, shift, nil)
}

// ringAllgatherFrom is ringAllgather whose first step sends this rank's
// block from own (its caller's send buffer, the same bytes) where own is
// not nil: a peer that copies the message straight out of this process
// (endpoint's single copy) then reads lines this rank has not just
// written, which cost it twice as much to take from this core's cache
// (an Allgather of 4 MiB between 2 processes: docs/perf/collectives.md).
func (c *Coll) ringAllgatherFrom(ctx context.Context, b []byte, off func(int) int, shift int, own []byte) error {
	p := c.size
	v := (c.rank - shift + p) % p
	left, right := (c.rank-1+p)%p, (c.rank+1)%p
	for s := 0; s < p-1; s++ {
		sb, rb := (v-s+p)%p, (v-s-1+p)%p
		out := b[off(sb):off(sb+1)]
		if s == 0 && own != nil {
			out = own
		}
		if err := c.sendrecv(ctx, out, right, b[off(rb):off(rb+1)], left); err != nil {
			return err
		}
	}
	return nil
}

// overlap reports whether a and b share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
