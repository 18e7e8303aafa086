package collectives

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/weft-hpc/weft/internal/memcopy"
)

// sizeOf is the size of T (pointer-free, checked by elemSize).
func sizeOf[T any]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// Reduce combines every rank's send with op, element by element, into
// root's recv (len(recv) = len(send) at the root; recv is not used
// elsewhere). In place: the root passes send == nil, its contribution in
// recv. Small messages: a binomial tree; large ones: a ring
// reduce-scatter whose blocks are then gathered at the root
// (ReduceScatterGather). Non-commutative operations and deterministic
// mode combine in rank order (the contributions gathered, then folded).
func Reduce[T any](ctx context.Context, c *Coll, send, recv []T, op Op[T], root int) error {
	if err := c.enter(callReduce); err != nil {
		return err
	}
	es, err := elemSize[T]()
	if err != nil {
		return c.fail(err)
	}
	if err := op.valid(); err != nil {
		return c.fail(err)
	}
	if err := c.checkRoot(root); err != nil {
		return c.fail(err)
	}
	n, src := len(send), send
	var res []T
	if c.rank == root {
		res = recv
		if send == nil {
			n, src = len(recv), recv
		} else if err := checkLen("recv", len(recv), n); err != nil {
			return c.fail(err)
		} else if overlap(bytesOf(send), bytesOf(recv)) {
			return c.fail(errAlias)
		}
	}
	if c.hierFor(CollReduce, c.orderedBytes(op.commutative, n*es)) {
		return hierReduce(ctx, c, src, res, &op, root, callSig{call: callReduce, root: root, count: n, esize: es, op: op.code})
	}
	if c.localNB(CollReduce) {
		if h := c.own.hier; h.procs > 1 {
			// the process's part in the scratch of the member that folds
			// it (pre, remote and post are the last member's)
			var acc []T
			proot := h.procOf[root]
			atRoot := proot == h.procOf[c.rank]
			return c.runHybrid(callSig{call: callReduce, root: root, count: n, esize: es, op: op.code, alg: algLocal}, bytesOf(src), bytesOf(res),
				func(slots []nbSlot) {
					acc = elems[T](c.buf(0, n*es))
					localReduce(slots, acc, &op)
				},
				func(pn *Coll, _ []nbSlot) (*Request, error) {
					if atRoot {
						return Ireduce(pn, nil, acc, op, proot)
					}
					return Ireduce(pn, acc, nil, op, proot)
				},
				func(slots []nbSlot) {
					if atRoot {
						memcopy.CopyOf(elems[T](slots[h.local[root]].recv), acc)
					}
				})
		}
		return c.runLocal(callSig{call: callReduce, root: root, count: n, esize: es, op: op.code, alg: algLocal}, bytesOf(src), bytesOf(res),
			toRoot(c, n*es, root), func(slots []nbSlot) {
				out := elems[T](slots[root].recv)
				if root == 0 || !overlap(slots[root].send, slots[root].recv) {
					localReduce(slots, out, &op)
					return
				}
				acc := elems[T](c.buf(0, n*es)) // in place at root > 0: its contribution is read after x₀
				localReduce(slots, acc, &op)
				memcopy.CopyOf(out, acc)
			})
	}
	c.noteFlat(CollReduce)
	alg := c.cfg.pick(CollReduce, n*es, c.size)
	if err := c.ready(ctx, callSig{call: callReduce, root: root, count: n, esize: es, op: op.code, alg: alg}); err != nil {
		return c.fail(err)
	}
	return c.done(reduceTo(ctx, c, src, res, &op, root, alg))
}

func reduceTo[T any](ctx context.Context, c *Coll, src, res []T, op *Op[T], root int, alg Algorithm) error {
	if c.size == 1 {
		memcopy.CopyOf(res, src)
		return nil
	}
	ordered := c.cfg.det || !op.commutative
	switch {
	case alg == ReduceScatterGather:
		return reduceRSGather(ctx, c, src, res, op, root, ordered)
	case alg == Binomial && !ordered:
		return reduceBinomial(ctx, c, src, res, op, root)
	}
	return reduceGatherFold(ctx, c, src, res, op, root, alg == Linear)
}

// fold sets res to all's p blocks of n combined in rank order.
func fold[T any](res, all []T, n, p int, op *Op[T]) {
	memcopy.CopyOf(res, all[:n])
	for i := 1; i < p; i++ {
		op.left(res, all[i*n:(i+1)*n])
	}
}

// reduceGatherFold gathers the contributions at the root (binomial tree,
// or linear) and folds them there in rank order.
func reduceGatherFold[T any](ctx context.Context, c *Coll, src, res []T, op *Op[T], root int, linear bool) error {
	n, p := len(src), c.size
	var all []byte
	if c.rank == root {
		all = c.buf(1, p*n*sizeOf[T]())
	}
	var err error
	if linear {
		err = c.gatherLinear(ctx, bytesOf(src), all, root)
	} else {
		err = c.gatherBinomial(ctx, bytesOf(src), all, root)
	}
	if err != nil || c.rank != root {
		return err
	}
	fold(res, elems[T](all), n, p, op)
	return nil
}

// reduceBinomial (commutative op): in ranks relative to the root, rank v
// combines what its children v+2^j send into its own contribution and
// sends the result to v - lowbit(v).
func reduceBinomial[T any](ctx context.Context, c *Coll, src, res []T, op *Op[T], root int) error {
	p, n, es := c.size, len(src), sizeOf[T]()
	v := (c.rank - root + p) % p
	acc, own := src, false
	if c.rank == root {
		memcopy.CopyOf(res, src)
		acc, own = res, true
	}
	var tmp []T
	for mask := 1; mask < p; mask <<= 1 {
		if v&mask != 0 {
			if err := c.send(bytesOf(acc), (v-mask+root)%p); err != nil {
				return err
			}
			return c.wait(ctx)
		}
		if v+mask >= p {
			continue
		}
		if tmp == nil {
			tmp = elems[T](c.buf(1, n*es))
		}
		if err := c.recv(bytesOf(tmp), (v+mask+root)%p); err != nil {
			return err
		}
		if err := c.wait(ctx); err != nil {
			return err
		}
		if !own {
			w := elems[T](c.buf(0, n*es))
			memcopy.CopyOf(w, acc)
			acc, own = w, true
		}
		op.left(acc, tmp)
	}
	return nil
}

// reduceRSGather reduce-scatters into p blocks (ring, or in rank order
// when ordered) and gathers the blocks at the root.
func reduceRSGather[T any](ctx context.Context, c *Coll, src, res []T, op *Op[T], root int, ordered bool) error {
	p, r, n, es := c.size, c.rank, len(src), sizeOf[T]()
	off := func(i int) int { return part(n, p, i) }
	var acc []T // holds this rank's reduced block at off(r)
	switch {
	case r == root:
		acc = res
	default:
		acc = elems[T](c.buf(0, n*es))
	}
	if ordered {
		if err := orderedReduceScatter(ctx, c, src, acc[off(r):off(r+1)], op, off); err != nil {
			return err
		}
	} else {
		memcopy.CopyOf(acc, src)
		if err := ringReduceScatter(ctx, c, acc, op, off); err != nil {
			return err
		}
	}
	if r != root {
		if err := c.send(bytesOf(acc[off(r):off(r+1)]), root); err != nil {
			return err
		}
		return c.wait(ctx)
	}
	for i := 0; i < p; i++ {
		if i != root {
			if err := c.recv(bytesOf(res[off(i):off(i+1)]), i); err != nil {
				return err
			}
		}
	}
	return c.wait(ctx)
}

// ringReduceScatter (commutative op) leaves block r (acc[off(r):off(r+1)])
// of rank r reduced over all ranks: in step s each rank sends block
// r-s-1, as combined so far, to its right neighbour and combines block
// r-s-2 from its left into its own.
func ringReduceScatter[T any](ctx context.Context, c *Coll, acc []T, op *Op[T], off func(int) int) error {
	p, r := c.size, c.rank
	mx := 0
	for i := 0; i < p; i++ {
		mx = max(mx, off(i+1)-off(i))
	}
	tmp := elems[T](c.buf(1, mx*sizeOf[T]()))
	left, right := (r-1+p)%p, (r+1)%p
	for s := 0; s < p-1; s++ {
		sb, rb := (r-s-1+2*p)%p, (r-s-2+2*p)%p
		m := off(rb+1) - off(rb)
		if err := c.sendrecv(ctx, bytesOf(acc[off(sb):off(sb+1)]), right, bytesOf(tmp[:m]), left); err != nil {
			return err
		}
		op.left(acc[off(rb):off(rb+1)], tmp[:m])
	}
	return nil
}

// orderedReduceScatter sets dst to block r of every rank's src
// (src[off(r):off(r+1)]) combined in rank order: each rank sends block j
// to rank j and folds the p blocks it receives. dst may be src's block r.
func orderedReduceScatter[T any](ctx context.Context, c *Coll, src, dst []T, op *Op[T], off func(int) int) error {
	p, r := c.size, c.rank
	lo, hi := off(r), off(r+1)
	m := hi - lo
	stage := elems[T](c.buf(1, p*m*sizeOf[T]()))
	for i := 1; i < p; i++ {
		j := (r - i + p) % p
		if err := c.recv(bytesOf(stage[j*m:(j+1)*m]), j); err != nil {
			return err
		}
	}
	for i := 1; i < p; i++ {
		j := (r + i) % p
		if err := c.send(bytesOf(src[off(j):off(j+1)]), j); err != nil {
			return err
		}
	}
	memcopy.CopyOf(stage[r*m:(r+1)*m], src[lo:hi])
	if err := c.wait(ctx); err != nil {
		return err
	}
	fold(dst, stage, m, p, op)
	return nil
}

// Allreduce combines every rank's send with op, element by element, into
// every rank's recv (len(send) = len(recv), the same on every rank). In
// place: send == nil, each rank's contribution in recv. Small messages:
// recursive doubling (⌈log₂ p⌉ exchanges of the whole vector, with a fold
// step for the ranks past the largest power of two); large ones:
// Rabenseifner's reduce-scatter by recursive halving and allgather by
// recursive doubling, or the ring. Non-commutative operations keep rank
// order (recursive doubling does; the large algorithms then reduce-scatter
// pairwise in rank order), and deterministic mode folds in rank order.
func Allreduce[T any](ctx context.Context, c *Coll, send, recv []T, op Op[T]) error {
	if err := c.enter(callAllreduce); err != nil {
		return err
	}
	es, n, err := elemwise(send, recv, op)
	if err != nil {
		return c.fail(err)
	}
	if c.hierFor(CollAllreduce, c.orderedBytes(op.commutative, n*es)) {
		return hierAllreduce(ctx, c, send, recv, &op, callSig{call: callAllreduce, root: -1, count: n, esize: es, op: op.code})
	}
	if c.localNB(CollAllreduce) {
		s := callSig{call: callAllreduce, root: -1, count: n, esize: es, op: op.code, alg: algLocal}
		if c.own.hier.procs > 1 {
			// member 0's recv carries the process's part, then the result
			return c.runHybrid(s, bytesOf(send), bytesOf(recv),
				func(slots []nbSlot) { localReduce(slots, elems[T](slots[0].recv), &op) },
				func(pn *Coll, slots []nbSlot) (*Request, error) {
					return Iallreduce(pn, nil, elems[T](slots[0].recv), op)
				},
				func(slots []nbSlot) {
					for _, m := range slots[1:] {
						memcopy.Copy(m.recv, slots[0].recv)
					}
				})
		}
		return c.runLocal(s, bytesOf(send), bytesOf(recv),
			noGive, func(slots []nbSlot) {
				acc := elems[T](slots[0].recv) // every other contribution is read before any other recv is written
				localReduce(slots, acc, &op)
				for _, s := range slots[1:] {
					memcopy.Copy(s.recv, slots[0].recv)
				}
			})
	}
	alg := c.cfg.pick(CollAllreduce, n*es, c.size)
	if err := c.ready(ctx, callSig{call: callAllreduce, root: -1, count: n, esize: es, op: op.code, alg: alg}); err != nil {
		return c.fail(err)
	}
	if send != nil {
		memcopy.CopyOf(recv, send)
	}
	return c.done(allreduce(ctx, c, recv, &op, alg))
}

func allreduce[T any](ctx context.Context, c *Coll, acc []T, op *Op[T], alg Algorithm) error {
	if c.size == 1 {
		return nil
	}
	ordered := c.cfg.det || !op.commutative
	switch {
	case alg == RecursiveDoubling && c.cfg.det:
		return allreduceGatherFold(ctx, c, acc, op)
	case alg == RecursiveDoubling:
		return allreduceRecDbl(ctx, c, acc, op)
	case ordered:
		n, p := len(acc), c.size
		off := func(i int) int { return part(n, p, i) }
		if err := orderedReduceScatter(ctx, c, acc, acc[off(c.rank):off(c.rank+1)], op, off); err != nil {
			return err
		}
		es := sizeOf[T]()
		return c.ringAllgather(ctx, bytesOf(acc), func(i int) int { return off(i) * es }, 0)
	case alg == Rabenseifner:
		return allreduceRabenseifner(ctx, c, acc, op)
	}
	n, p, es := len(acc), c.size, sizeOf[T]()
	off := func(i int) int { return part(n, p, i) }
	if err := ringReduceScatter(ctx, c, acc, op, off); err != nil {
		return err
	}
	return c.ringAllgather(ctx, bytesOf(acc), func(i int) int { return off(i) * es }, 0)
}

// allreduceGatherFold (deterministic mode, small vectors): every rank
// gathers every contribution (Bruck) and folds them in rank order.
func allreduceGatherFold[T any](ctx context.Context, c *Coll, acc []T, op *Op[T]) error {
	p, r, n := c.size, c.rank, len(acc)
	tmp, err := c.bruck(ctx, bytesOf(acc))
	if err != nil {
		return err
	}
	all := elems[T](tmp) // block i is rank (r+i)%p's
	at := func(k int) []T { i := (k - r + p) % p; return all[i*n : (i+1)*n] }
	memcopy.CopyOf(acc, at(0))
	for k := 1; k < p; k++ {
		op.left(acc, at(k))
	}
	return nil
}

// pow2Fold returns the largest power of two not above p and the number of
// ranks past it, rem: ranks 2i and 2i+1 for i < rem fold into one.
func pow2Fold(p int) (pof2, rem int) {
	pof2 = 1
	for pof2*2 <= p {
		pof2 *= 2
	}
	return pof2, p - pof2
}

// foldIn is the first step of the power-of-two algorithms: each even rank
// below 2·rem sends its vector to the odd rank above it, which combines
// the two (lower rank on the left) and stands for both. It returns the
// rank's number among the pof2 that go on, or -1.
func foldIn[T any](ctx context.Context, c *Coll, acc, tmp []T, op *Op[T], rem int) (int, error) {
	r := c.rank
	if r >= 2*rem {
		return r - rem, nil
	}
	if r%2 == 0 {
		if err := c.send(bytesOf(acc), r+1); err != nil {
			return -1, err
		}
		return -1, c.wait(ctx)
	}
	if err := c.recv(bytesOf(tmp), r-1); err != nil {
		return -1, err
	}
	if err := c.wait(ctx); err != nil {
		return -1, err
	}
	op.right(acc, tmp)
	return r / 2, nil
}

// foldOut hands the result back to the even ranks foldIn left out.
func (c *Coll) foldOut(ctx context.Context, b []byte, rem int) error {
	r := c.rank
	if r >= 2*rem {
		return nil
	}
	var err error
	if r%2 == 1 {
		err = c.send(b, r-1)
	} else {
		err = c.recv(b, r+1)
	}
	if err != nil {
		return err
	}
	return c.wait(ctx)
}

// realRank maps a rank among the pof2 of the power-of-two algorithms back
// to the communicator.
func realRank(nr, rem int) int {
	if nr < rem {
		return 2*nr + 1
	}
	return nr + rem
}

// allreduceRecDbl: after foldIn, pof2 ranks exchange whole vectors with
// rank xor 2^k, the lower rank's always on the left (so non-commutative
// operations keep rank order).
func allreduceRecDbl[T any](ctx context.Context, c *Coll, acc []T, op *Op[T]) error {
	n, r := len(acc), c.rank
	pof2, rem := pow2Fold(c.size)
	tmp := elems[T](c.buf(1, n*sizeOf[T]()))
	nr, err := foldIn(ctx, c, acc, tmp, op, rem)
	if err != nil {
		return err
	}
	if nr >= 0 {
		for mask := 1; mask < pof2; mask <<= 1 {
			dst := realRank(nr^mask, rem)
			if err := c.sendrecv(ctx, bytesOf(acc), dst, bytesOf(tmp), dst); err != nil {
				return err
			}
			if dst < r {
				op.right(acc, tmp)
			} else {
				op.left(acc, tmp)
			}
		}
	}
	return c.foldOut(ctx, bytesOf(acc), rem)
}

// allreduceRabenseifner (commutative op): after foldIn, the pof2 ranks
// cut the vector into pof2 blocks; by recursive halving (partner rank xor
// pof2/2, then pof2/4, ...) each keeps half of its range and sends the
// other half, combining what it receives, until rank i holds block i
// reduced; recursive doubling then gathers the blocks back.
func allreduceRabenseifner[T any](ctx context.Context, c *Coll, acc []T, op *Op[T]) error {
	n := len(acc)
	pof2, rem := pow2Fold(c.size)
	tmp := elems[T](c.buf(1, n*sizeOf[T]()))
	nr, err := foldIn(ctx, c, acc, tmp, op, rem)
	if err != nil {
		return err
	}
	if nr >= 0 {
		off := func(i int) int { return part(n, pof2, i) }
		lo, hi := 0, pof2
		for dist := pof2 / 2; dist >= 1; dist >>= 1 {
			dst := realRank(nr^dist, rem)
			mid := (lo + hi) / 2
			klo, khi, glo, ghi := lo, mid, mid, hi
			if nr&dist != 0 {
				klo, khi, glo, ghi = mid, hi, lo, mid
			}
			m := off(khi) - off(klo)
			if err := c.sendrecv(ctx, bytesOf(acc[off(glo):off(ghi)]), dst, bytesOf(tmp[:m]), dst); err != nil {
				return err
			}
			op.left(acc[off(klo):off(khi)], tmp[:m])
			lo, hi = klo, khi
		}
		for dist := 1; dist < pof2; dist <<= 1 {
			dst := realRank(nr^dist, rem)
			w := hi - lo
			plo, phi := hi, hi+w
			if nr&dist != 0 {
				plo, phi = lo-w, lo
			}
			if err := c.sendrecv(ctx, bytesOf(acc[off(lo):off(hi)]), dst, bytesOf(acc[off(plo):off(phi)]), dst); err != nil {
				return err
			}
			lo, hi = min(lo, plo), max(hi, phi)
		}
	}
	return c.foldOut(ctx, bytesOf(acc), rem)
}

// ReduceScatterBlock combines every rank's send (Size()·n elements) with
// op and leaves block r of the result, n = len(recv) elements, in rank
// r's recv. In place: send == nil and recv holds the Size()·n inputs; the
// result lands in recv[:n]. Commutative operations: the ring (p-1 steps
// of one block); non-commutative ones and deterministic mode: pairwise,
// every rank receiving its block from all and folding in rank order.
func ReduceScatterBlock[T any](ctx context.Context, c *Coll, send, recv []T, op Op[T]) error {
	return reduceScatterCall(ctx, c, callReduceScatterBlock, send, recv, nil, op)
}

// ReduceScatter combines every rank's send with op and leaves block r of
// the result, counts[r] elements, in rank r's recv: send holds the blocks
// one after the other (the sum of counts elements), counts is the same on
// every rank and len(recv) is counts[rank] (MPI_Reduce_scatter). In
// place: send == nil and recv holds the whole input; the result lands in
// recv[:counts[rank]]. Algorithms as ReduceScatterBlock's.
func ReduceScatter[T any](ctx context.Context, c *Coll, send, recv []T, counts []int, op Op[T]) error {
	return reduceScatterCall(ctx, c, callReduceScatter, send, recv, counts, op)
}

// reduceScatterCall is ReduceScatter, or ReduceScatterBlock when counts
// is nil (every block len(recv) elements, or len(recv)/p in place).
func reduceScatterCall[T any](ctx context.Context, c *Coll, id callID, send, recv []T, counts []int, op Op[T]) error {
	if err := c.enter(id); err != nil {
		return err
	}
	es, err := elemSize[T]()
	if err != nil {
		return c.fail(err)
	}
	if err := op.valid(); err != nil {
		return c.fail(err)
	}
	p := c.size
	if counts == nil {
		n := len(recv)
		if send == nil {
			if len(recv)%p != 0 {
				return c.fail(fmt.Errorf("in-place reduce-scatter of %d elements, not a multiple of %d ranks: %w", len(recv), p, ErrInvalid))
			}
			n = len(recv) / p
		}
		counts = make([]int, p)
		for i := range counts {
			counts[i] = n
		}
	} else if len(counts) != p {
		return c.fail(fmt.Errorf("reduce-scatter: %d counts for %d ranks: %w", len(counts), p, ErrInvalid))
	}
	offs := make([]int, p+1)
	for i, n := range counts {
		if n < 0 {
			return c.fail(fmt.Errorf("reduce-scatter: count %d of rank %d: %w", n, i, ErrInvalid))
		}
		offs[i+1] = offs[i] + n
	}
	total, mine := offs[p], counts[c.rank]
	src := send
	if send == nil {
		if err := checkLen("recv", len(recv), total); err != nil {
			return c.fail(err)
		}
		src = recv
	} else if err := checkLen("send", len(send), total); err != nil {
		return c.fail(err)
	} else if err := checkLen("recv", len(recv), mine); err != nil {
		return c.fail(err)
	} else if overlap(bytesOf(send), bytesOf(recv)) {
		return c.fail(errAlias)
	}
	alg := c.cfg.pick(CollReduceScatter, total*es/p, p)
	if c.cfg.det || !op.commutative {
		alg = Pairwise
	}
	if err := c.ready(ctx, callSig{call: id, root: -1, count: total, esize: es, op: op.code, alg: alg}); err != nil {
		return c.fail(err)
	}
	return c.done(reduceScatter(ctx, c, src, recv[:mine], send != nil, func(i int) int { return offs[i] }, &op, alg))
}

// reduceScatter leaves in dst block r (src[off(r):off(r+1)]) of every
// rank's src combined: pairwise in rank order, or around the ring
// (commutative operations) in a copy of src when copyIn, else in src
// itself (in place: dst may overlap it).
func reduceScatter[T any](ctx context.Context, c *Coll, src, dst []T, copyIn bool, off func(int) int, op *Op[T], alg Algorithm) error {
	p, r := c.size, c.rank
	switch {
	case p == 1:
		memcopy.CopyOf(dst, src[off(0):off(1)])
		return nil
	case alg == Pairwise:
		return orderedReduceScatter(ctx, c, src, dst, op, off)
	}
	acc := src
	if copyIn {
		acc = elems[T](c.buf(0, off(p)*sizeOf[T]()))
		memcopy.CopyOf(acc, src[:off(p)])
	}
	if err := ringReduceScatter(ctx, c, acc, op, off); err != nil {
		return err
	}
	memcopy.CopyOf(dst, acc[off(r):off(r+1)])
	return nil
}

// elemwise checks the arguments of a reduction whose send and recv are
// the same length on every rank (Allreduce, Scan, Exscan): the element
// type, the operation, and send (nil: in place) against recv. It returns
// the element size and the count.
func elemwise[T any](send, recv []T, op Op[T]) (es, n int, err error) {
	if es, err = elemSize[T](); err != nil {
		return 0, 0, err
	}
	if err := op.valid(); err != nil {
		return 0, 0, err
	}
	n = len(recv)
	if send != nil {
		if err := checkLen("send", len(send), n); err != nil {
			return 0, 0, err
		}
		if overlap(bytesOf(send), bytesOf(recv)) {
			return 0, 0, errAlias
		}
	}
	return es, n, nil
}
