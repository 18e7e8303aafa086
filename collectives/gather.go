package collectives

import (
	"context"
	"fmt"
	"sort"

	"github.com/weft-hpc/weft/internal/memcopy"
)

// Gather collects every rank's send, in rank order, into root's recv:
// len(recv) at the root is Size()·len(send), and len(send) is the same on
// every rank. recv is not used on other ranks. In place: the root passes
// send == nil, its own part already at recv[root·n:(root+1)·n]. Small
// blocks are gathered up a binomial tree, large ones straight to the root.
func Gather[T any](ctx context.Context, c *Coll, send, recv []T, root int) error {
	if err := c.enter(callGather); err != nil {
		return err
	}
	all, mine, alg, err := rooted(ctx, c, callGather, CollGather, recv, send, root, "gather into", "recv")
	if err != nil {
		return c.fail(err)
	}
	switch alg {
	case algHier:
		return hierGatherTo(ctx, c, mine, all, root)
	case algLocal:
		nb := len(mine)
		return c.runLocal(callSig{call: callGather, root: root, count: nb, esize: 1, alg: algLocal}, mine, all,
			toRoot(c, nb, root), func(slots []nbSlot) { localGather(slots, nb, root) })
	case Linear:
		return c.done(c.gatherLinear(ctx, mine, all, root))
	}
	return c.done(c.gatherBinomial(ctx, mine, all, root))
}

// rooted prepares a rooted collective that moves one block of n elements
// per rank between the root's whole (Size()·n elements, named wholeName)
// and every rank's part (n elements): element size, root and length
// checks, the in-place form (the root passes part == nil, its block then
// being its own slot of whole), and the agreement on the call. It returns
// the root's whole and this rank's block as bytes, and the algorithm
// (algHier for the hierarchical path, hierops.go).
func rooted[T any](ctx context.Context, c *Coll, call callID, k Collective, whole, part []T, root int, what, wholeName string) (all, mine []byte, alg Algorithm, err error) {
	es, err := elemSize[T]()
	if err != nil {
		return nil, nil, 0, err
	}
	if err := c.checkRoot(root); err != nil {
		return nil, nil, 0, err
	}
	n, inPlace := len(part), false
	if c.rank == root {
		if part == nil {
			if len(whole)%c.size != 0 {
				return nil, nil, 0, fmt.Errorf("in-place %s %d elements, not a multiple of %d ranks: %w", what, len(whole), c.size, ErrInvalid)
			}
			n, inPlace = len(whole)/c.size, true
		} else if err := checkLen(wholeName, len(whole), c.size*n); err != nil {
			return nil, nil, 0, err
		} else if overlap(bytesOf(part), bytesOf(whole)) {
			return nil, nil, 0, errAlias
		}
	}
	alg = c.cfg.pick(k, n*es, c.size)
	ready := c.ready
	if c.hierFits(k, n*es) {
		alg, ready = algHier, c.hierReady
	} else if c.localNB(k) {
		alg, ready = algLocal, c.localReady
	}
	if err := ready(ctx, callSig{call: call, root: root, count: n, esize: es, alg: alg}); err != nil {
		return nil, nil, 0, err
	}
	if c.rank == root {
		all = bytesOf(whole)
	}
	mine = bytesOf(part)
	if inPlace {
		mine = all[root*n*es : (root+1)*n*es]
	}
	return all, mine, alg, nil
}

// rootedV checks Gatherv or Scatterv: element size and root, at the root
// the counts and displacements against whole (disjoint: regions must not
// overlap) and its own part (nil: in place). It returns the element
// size.
func rootedV[T any](c *Coll, whole, part []T, counts, displs []int, root int, what, partName string, disjoint bool) (int, error) {
	es, err := elemSize[T]()
	if err != nil {
		return 0, err
	}
	if err := c.checkRoot(root); err != nil {
		return 0, err
	}
	if c.rank == root {
		if err := vlayout(what, counts, displs, c.size, len(whole), disjoint); err != nil {
			return 0, err
		}
		if part != nil {
			if err := checkLen(partName, len(part), counts[root]); err != nil {
				return 0, err
			}
			if overlap(bytesOf(part), bytesOf(whole)) {
				return 0, errAlias
			}
		}
	}
	return es, nil
}

// vblocks returns the function giving rank r's block of buf (elements of
// es bytes at displs[r], counts[r] of them) as bytes.
func vblocks(buf []byte, counts, displs []int, es int) func(r int) []byte {
	return func(r int) []byte { return buf[displs[r]*es : (displs[r]+counts[r])*es] }
}

var errAlias = fmt.Errorf("send and recv overlap (pass send == nil for the in-place form): %w", ErrInvalid)

func checkLen(what string, got, want int) error {
	if got != want {
		return fmt.Errorf("len(%s) = %d, want %d: %w", what, got, want, ErrInvalid)
	}
	return nil
}

// gatherLinear: the root receives each rank's block straight into all.
func (c *Coll) gatherLinear(ctx context.Context, mine, all []byte, root int) error {
	if c.rank != root {
		if err := c.send(mine, root); err != nil {
			return err
		}
		return c.wait(ctx)
	}
	n := len(mine)
	for r := 0; r < c.size; r++ {
		if r != root {
			if err := c.recv(all[r*n:(r+1)*n], r); err != nil {
				return err
			}
		}
	}
	memcopy.Copy(all[root*n:], mine)
	return c.wait(ctx)
}

// lowbit is the lowest set bit of v; for the root (v = 0) a power of two
// at least p.
func lowbit(v, p int) int {
	if v == 0 {
		m := 1
		for m < p {
			m <<= 1
		}
		return m
	}
	return v & -v
}

// gatherBinomial: in ranks relative to the root, rank v collects the
// blocks of its subtree, v .. v+lowbit(v)-1, from its children v+2^j and
// sends them to v - lowbit(v); the root puts them in rank order into all.
func (c *Coll) gatherBinomial(ctx context.Context, mine, all []byte, root int) error {
	p, n := c.size, len(mine)
	if p == 1 {
		memcopy.Copy(all, mine)
		return nil
	}
	v := (c.rank - root + p) % p
	lb := lowbit(v, p)
	sub := min(lb, p-v) // blocks of my subtree
	var tmp []byte
	switch {
	case sub == 1:
		tmp = mine
	case v == 0 && root == 0:
		tmp = all
		memcopy.Copy(tmp, mine)
	default:
		tmp = c.buf(0, sub*n)
		memcopy.Copy(tmp, mine)
	}
	for mask := 1; mask < lb && v+mask < p; mask <<= 1 {
		cn := min(mask, p-v-mask)
		if err := c.recv(tmp[mask*n:(mask+cn)*n], (v+mask+root)%p); err != nil {
			return err
		}
	}
	if err := c.wait(ctx); err != nil {
		return err
	}
	if v != 0 {
		if err := c.send(tmp[:sub*n], (v-lb+root)%p); err != nil {
			return err
		}
		return c.wait(ctx)
	}
	if root != 0 {
		for i := 0; i < p; i++ {
			memcopy.Copy(all[((i+root)%p)*n:], tmp[i*n:(i+1)*n])
		}
	}
	return nil
}

// Scatter sends block r of root's send, send[r·n:(r+1)·n], to rank r's
// recv, n = len(recv) the same on every rank; len(send) at the root is
// Size()·n, and send is not used elsewhere. In place: the root passes
// recv == nil and its block stays where it is in send. Small blocks go
// down a binomial tree, large ones straight from the root.
func Scatter[T any](ctx context.Context, c *Coll, send, recv []T, root int) error {
	if err := c.enter(callScatter); err != nil {
		return err
	}
	all, mine, alg, err := rooted(ctx, c, callScatter, CollScatter, send, recv, root, "scatter of", "send")
	if err != nil {
		return c.fail(err)
	}
	switch alg {
	case algHier:
		return hierScatterFrom(ctx, c, all, mine, root)
	case algLocal:
		nb := len(mine)
		give := fromRoot(c, c.size*nb, nb, root)
		if give.at >= 0 {
			// The root, which leaves at once, takes its own block now (in
			// place, a copy onto itself).
			copy(mine, all[root*nb:(root+1)*nb])
			mine = nil
		}
		return c.runLocal(callSig{call: callScatter, root: root, count: nb, esize: 1, alg: algLocal}, all, mine,
			give, func(slots []nbSlot) { localScatter(slots, nb, root) })
	case Linear:
		return c.done(c.scatterLinear(ctx, all, mine, root))
	}
	return c.done(c.scatterBinomial(ctx, all, mine, root))
}

func (c *Coll) scatterLinear(ctx context.Context, all, mine []byte, root int) error {
	if c.rank != root {
		if err := c.recv(mine, root); err != nil {
			return err
		}
		return c.wait(ctx)
	}
	n := len(mine)
	for i := 1; i < c.size; i++ {
		r := (root + i) % c.size
		if err := c.send(all[r*n:(r+1)*n], r); err != nil {
			return err
		}
	}
	memcopy.Copy(mine, all[root*n:(root+1)*n])
	return c.wait(ctx)
}

// scatterBinomial mirrors gatherBinomial: rank v receives the blocks of
// its subtree from v - lowbit(v) and hands each child v+2^j its part.
func (c *Coll) scatterBinomial(ctx context.Context, all, mine []byte, root int) error {
	p, n := c.size, len(mine)
	if p == 1 {
		memcopy.Copy(mine, all)
		return nil
	}
	v := (c.rank - root + p) % p
	lb := lowbit(v, p)
	sub := min(lb, p-v)
	var tmp []byte
	switch {
	case sub == 1:
		tmp = mine
	case v == 0 && root == 0:
		tmp = all
	case v == 0:
		tmp = c.buf(0, p*n)
		for i := 0; i < p; i++ {
			memcopy.Copy(tmp[i*n:(i+1)*n], all[((i+root)%p)*n:])
		}
	default:
		tmp = c.buf(0, sub*n)
	}
	if v != 0 {
		if err := c.recv(tmp[:sub*n], (v-lb+root)%p); err != nil {
			return err
		}
		if err := c.wait(ctx); err != nil {
			return err
		}
	}
	for mask := lb >> 1; mask > 0; mask >>= 1 {
		if v+mask < p {
			cn := min(mask, p-v-mask)
			if err := c.send(tmp[mask*n:(mask+cn)*n], (v+mask+root)%p); err != nil {
				return err
			}
		}
	}
	if sub > 1 {
		memcopy.Copy(mine, tmp[:n])
	}
	return c.wait(ctx)
}

// Allgather collects every rank's send, in rank order, into every rank's
// recv: len(recv) is Size()·len(send), len(send) the same on every rank.
// In place: send == nil, each rank's own block already at
// recv[rank·n:(rank+1)·n]. Small results use recursive doubling on a
// power of two ranks and Bruck's algorithm otherwise (⌈log₂ p⌉ rounds
// each), large ones the ring (p-1 steps of one block).
func Allgather[T any](ctx context.Context, c *Coll, send, recv []T) error {
	if err := c.enter(callAllgather); err != nil {
		return err
	}
	es, err := elemSize[T]()
	if err != nil {
		return c.fail(err)
	}
	n := len(send)
	if send == nil {
		if len(recv)%c.size != 0 {
			return c.fail(fmt.Errorf("in-place allgather into %d elements, not a multiple of %d ranks: %w", len(recv), c.size, ErrInvalid))
		}
		n = len(recv) / c.size
	} else if err := checkLen("recv", len(recv), c.size*n); err != nil {
		return c.fail(err)
	} else if overlap(bytesOf(send), bytesOf(recv)) {
		return c.fail(errAlias)
	}
	all := bytesOf(recv)
	nb := n * es
	if c.hierFits(CollAllgather, c.size*nb) || c.hierStreams(CollAllgather, nb) {
		return hierAllgather(ctx, c, bytesOf(send), all, callSig{call: callAllgather, root: -1, count: n, esize: es})
	}
	if c.localNB(CollAllgather) {
		return c.runLocal(callSig{call: callAllgather, root: -1, count: n, esize: es, alg: algLocal}, bytesOf(send), all,
			noGive, func(slots []nbSlot) { localAllgather(slots, nb) })
	}
	alg := c.cfg.pick(CollAllgather, c.size*n*es, c.size)
	if err := c.ready(ctx, callSig{call: callAllgather, root: -1, count: n, esize: es, alg: alg}); err != nil {
		return c.fail(err)
	}
	if send != nil {
		memcopy.Copy(all[c.rank*nb:], bytesOf(send))
	}
	return c.done(c.allgather(ctx, all, nb, alg, bytesOf(send)))
}

// allgather completes all, p blocks of nb bytes of which this rank's own
// is in place (and in own, when not nil: the ring sends it from there),
// with the ring or Bruck's algorithm.
func (c *Coll) allgather(ctx context.Context, all []byte, nb int, alg Algorithm, own []byte) error {
	if c.size == 1 {
		return nil
	}
	switch alg {
	case Ring:
		return c.ringAllgatherFrom(ctx, all, func(i int) int { return i * nb }, 0, own)
	case RecursiveDoubling:
		return c.allgatherRecDbl(ctx, all, nb)
	}
	tmp, err := c.bruck(ctx, all[c.rank*nb:(c.rank+1)*nb])
	if err != nil {
		return err
	}
	for i := 0; i < c.size; i++ {
		if r := (c.rank + i) % c.size; r != c.rank {
			memcopy.Copy(all[r*nb:(r+1)*nb], tmp[i*nb:])
		}
	}
	return nil
}

// allgatherRecDbl completes all (p blocks of nb bytes, this rank's in
// place) by recursive doubling: in round k each rank exchanges with rank
// xor 2^k the blocks it holds, those of its subcube of 2^k ranks, which
// lie together in all, so the blocks go straight from and into place.
// With p not a power of two, each rank r past the largest power of two
// p' ≤ p first hands its block to rank r-p', which carries it with its own
// (a second message per round, the blocks of the subcube's partners past
// p'), and at the end gets the whole result from it.
func (c *Coll) allgatherRecDbl(ctx context.Context, all []byte, nb int) error {
	p, me := c.size, c.rank
	pp := 1
	for pp*2 <= p {
		pp *= 2
	}
	extra := p - pp
	blocks := func(i, j int) []byte { return all[i*nb : j*nb] }
	if me >= pp {
		if err := c.send(blocks(me, me+1), me-pp); err != nil {
			return err
		}
		if err := c.wait(ctx); err != nil { // the block leaves before all is written
			return err
		}
		if err := c.recv(all, me-pp); err != nil {
			return err
		}
		return c.wait(ctx)
	}
	if me < extra {
		if err := c.recv(blocks(me+pp, me+pp+1), me+pp); err != nil {
			return err
		}
		if err := c.wait(ctx); err != nil {
			return err
		}
	}
	for mask := 1; mask < pp; mask <<= 1 {
		peer := me ^ mask
		mine, theirs := me&^(mask-1), peer&^(mask-1)
		if err := c.recv(blocks(theirs, theirs+mask), peer); err != nil {
			return err
		}
		if e := min(theirs+mask, extra); theirs < e {
			if err := c.recv(blocks(theirs+pp, e+pp), peer); err != nil {
				return err
			}
		}
		if err := c.send(blocks(mine, mine+mask), peer); err != nil {
			return err
		}
		if e := min(mine+mask, extra); mine < e {
			if err := c.send(blocks(mine+pp, e+pp), peer); err != nil {
				return err
			}
		}
		if err := c.wait(ctx); err != nil {
			return err
		}
	}
	if me < extra {
		if err := c.send(all, me+pp); err != nil {
			return err
		}
		return c.wait(ctx)
	}
	return nil
}

// bruck gathers every rank's block of len(mine) bytes in ⌈log₂ p⌉ rounds:
// in round k each rank sends the min(2^k, p-2^k) blocks it has to rank
// -2^k and receives as many from rank +2^k. It returns scratch buffer 2
// holding block i of rank (rank+i)%p at i·len(mine).
func (c *Coll) bruck(ctx context.Context, mine []byte) ([]byte, error) {
	p, n := c.size, len(mine)
	tmp := c.buf(2, p*n)
	memcopy.Copy(tmp, mine)
	for dist := 1; dist < p; dist <<= 1 {
		cnt := min(dist, p-dist)
		if err := c.sendrecv(ctx, tmp[:cnt*n], (c.rank-dist+p)%p, tmp[dist*n:(dist+cnt)*n], (c.rank+dist)%p); err != nil {
			return nil, err
		}
	}
	return tmp, nil
}

// vlayout checks a v-collective's counts and displacements against a
// buffer of size elements: p entries each, counts non-negative, every
// region inside the buffer and, for a buffer written into (dst), no two
// regions overlapping.
func vlayout(what string, counts, displs []int, p, size int, dst bool) error {
	if len(counts) != p || len(displs) != p {
		return fmt.Errorf("%s: %d counts and %d displacements for %d ranks: %w", what, len(counts), len(displs), p, ErrInvalid)
	}
	for i := range counts {
		if counts[i] < 0 || displs[i] < 0 || displs[i] > size || counts[i] > size-displs[i] {
			return fmt.Errorf("%s: block %d (%d elements at %d) outside a buffer of %d: %w", what, i, counts[i], displs[i], size, ErrInvalid)
		}
	}
	if !dst {
		return nil
	}
	idx := make([]int, 0, p)
	for i := range counts {
		if counts[i] > 0 {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return displs[idx[a]] < displs[idx[b]] })
	for k := 1; k < len(idx); k++ {
		a, b := idx[k-1], idx[k]
		if displs[a]+counts[a] > displs[b] {
			return fmt.Errorf("%s: blocks %d and %d overlap: %w", what, a, b, ErrInvalid)
		}
	}
	return nil
}

// Gatherv collects rank r's send into root's recv at displs[r], counts[r]
// elements (len(send) on rank r must be counts[r]). counts and displs are
// used at the root only; regions must not overlap. In place: the root
// passes send == nil, its part already at recv[displs[root]:]. Linear:
// the root receives from every rank at once; where a process holds
// several ranks, through the process level of the hierarchy (hierv.go:
// one message per process).
func Gatherv[T any](ctx context.Context, c *Coll, send, recv []T, counts, displs []int, root int) error {
	if err := c.enter(callGatherv); err != nil {
		return err
	}
	es, err := rootedV(c, recv, send, counts, displs, root, "gatherv recv", "send", true)
	if err != nil {
		return c.fail(err)
	}
	v := &vcall{s: callSig{call: callGatherv, root: root, count: -1, esize: es}, mine: bytesOf(send), root: root}
	if c.rank == root {
		v.block = vblocks(bytesOf(recv), counts, displs, es)
		if send == nil {
			v.mine = v.block(root)
		}
	}
	return c.runGatherv(ctx, v)
}

// Scatterv sends send[displs[r]:displs[r]+counts[r]] of the root to rank
// r's recv (len(recv) must be counts[r]). counts and displs are used at
// the root only. In place: the root passes recv == nil and keeps its part
// in send. Linear; where a process holds several ranks, through the
// process level of the hierarchy (one message per process).
func Scatterv[T any](ctx context.Context, c *Coll, send []T, counts, displs []int, recv []T, root int) error {
	if err := c.enter(callScatterv); err != nil {
		return err
	}
	es, err := rootedV(c, send, recv, counts, displs, root, "scatterv send", "recv", false)
	if err != nil {
		return c.fail(err)
	}
	v := &vcall{s: callSig{call: callScatterv, root: root, count: -1, esize: es}, mine: bytesOf(recv), root: root}
	if c.rank == root {
		v.block = vblocks(bytesOf(send), counts, displs, es)
		if recv == nil {
			v.mine = v.block(root)
		}
	}
	return c.runScatterv(ctx, v)
}

// Allgatherv collects rank r's send (counts[r] elements) into every
// rank's recv at displs[r]; counts and displs are the same on every rank
// and the regions must not overlap. In place: send == nil, each rank's
// part already at recv[displs[rank]:]. Small results: every rank sends to
// every other at once; large ones: the ring. Where a process holds
// several ranks (small results, or every rank in one process), through
// the process level of the hierarchy (one message per pair of processes).
func Allgatherv[T any](ctx context.Context, c *Coll, send, recv []T, counts, displs []int) error {
	if err := c.enter(callAllgatherv); err != nil {
		return err
	}
	es, err := elemSize[T]()
	if err != nil {
		return c.fail(err)
	}
	if err := vlayout("allgatherv recv", counts, displs, c.size, len(recv), true); err != nil {
		return c.fail(err)
	}
	me := c.rank
	if send != nil {
		if err := checkLen("send", len(send), counts[me]); err != nil {
			return c.fail(err)
		}
		if overlap(bytesOf(send), bytesOf(recv)) {
			return c.fail(errAlias)
		}
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	v := &vcall{s: callSig{call: callAllgatherv, root: -1, count: -1, esize: es}, mine: bytesOf(send),
		block: vblocks(bytesOf(recv), counts, displs, es), root: -1}
	if send == nil {
		v.mine = v.block(me)
	}
	return c.runAllgatherv(ctx, v, total*es)
}
