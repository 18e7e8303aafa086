package collectives

import (
	"context"
	"fmt"

	"github.com/weft-hpc/weft/ddt"
)

// The typed reduce-scatters and scans: as ReduceTyped, the datatype must
// be built of T alone (checked on its type signature); the packed
// vectors are reduced by the untyped forms' algorithms.

// ReduceScatterBlockTyped combines every rank's send, Size()·count
// elements of t, with op and leaves block r of the result (elements
// r·count … (r+1)·count−1) in rank r's recv as count elements of t. In
// place: send == nil and recv holds the Size()·count elements of input;
// the result lands in its first count elements. As ReduceScatterBlock,
// on the packed vectors.
func ReduceScatterBlockTyped[T any](ctx context.Context, c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T]) error {
	if err := c.enter(callReduceScatterBlockTyped); err != nil {
		return err
	}
	if count < 0 {
		return c.fail(fmt.Errorf("count %d: %w", count, ErrInvalid))
	}
	counts := make([]int, c.size)
	for i := range counts {
		counts[i] = count
	}
	return reduceScatterTyped(ctx, c, send, recv, counts, t, op)
}

// ReduceScatterTyped combines every rank's send (the blocks of every
// rank one after the other: the sum of counts elements of t, counts the
// same on every rank) with op and leaves block r of the result, counts[r]
// elements, in rank r's recv. In place: send == nil and recv holds the
// whole input; the result lands in its first counts[rank] elements. As
// ReduceScatter, on the packed vectors.
func ReduceScatterTyped[T any](ctx context.Context, c *Coll, send, recv []T, counts []int, t *ddt.Type, op Op[T]) error {
	if err := c.enter(callReduceScatterTyped); err != nil {
		return err
	}
	return reduceScatterTyped(ctx, c, send, recv, counts, t, op)
}

func reduceScatterTyped[T any](ctx context.Context, c *Coll, send, recv []T, counts []int, t *ddt.Type, op Op[T]) error {
	p, me := c.size, c.rank
	es, m1, err := reductionType[T](t, 1, &op)
	if err != nil {
		return c.fail(err)
	}
	if len(counts) != p {
		return c.fail(fmt.Errorf("reduce-scatter: %d counts for %d ranks: %w", len(counts), p, ErrInvalid))
	}
	offs := make([]int, p+1)
	for i, n := range counts {
		if n < 0 || n > (1<<62)/max(m1*es, 1)-offs[i] {
			return c.fail(fmt.Errorf("reduce-scatter: count %d of rank %d: %w", n, i, ErrInvalid))
		}
		offs[i+1] = offs[i] + n
	}
	total := offs[p]
	inPlace := send == nil
	in := send
	if inPlace {
		in = recv
	}
	sl, err := newLayout("send", bytesOf(in), total, t)
	if err != nil {
		return c.fail(err)
	}
	rl, err := newLayout("recv", bytesOf(recv), counts[me], t)
	if err != nil {
		return c.fail(err)
	}
	if !inPlace && overlap(bytesOf(send), bytesOf(recv)) {
		return c.fail(errAlias)
	}
	alg := c.cfg.pick(CollReduceScatter, total*m1*es/p, p)
	if c.cfg.det || !op.commutative {
		alg = Pairwise
	}
	if err := c.ready(ctx, callSig{call: c.call, root: -1, count: total * m1, esize: es, op: op.code, alg: alg}); err != nil {
		return c.fail(err)
	}
	// scratch: the packed input, then the packed result
	sn, rn := 0, 0
	if !aligned[T](&sl) {
		sn = total * m1 * es
	}
	if !aligned[T](&rl) {
		rn = counts[me] * m1 * es
	}
	scratch := c.buf(typedSlot, sn+rn)
	src, err := vectorOf[T](&sl, scratch[:sn], true)
	if err != nil {
		return c.fail(err)
	}
	dst, _ := vectorOf[T](&rl, scratch[sn:], false)
	// the user's send is only read; a packed copy, or recv in place, may
	// be reduced in
	copyIn := !inPlace && aligned[T](&sl)
	if err := reduceScatter(ctx, c, src, dst, copyIn, func(i int) int { return offs[i] * m1 }, &op, alg); err != nil {
		return c.fail(err)
	}
	if !aligned[T](&rl) {
		if err := rl.unpack(bytesOf(dst), 0, counts[me]); err != nil {
			return c.fail(err)
		}
	}
	return c.done(nil)
}

// ScanTyped is Scan over count elements of t in send and recv (t built of
// T alone, as ReduceTyped): rank r's recv layout gets the combination,
// in rank order, of the packed vectors of ranks 0..r. In place: send ==
// nil, the contribution in recv. Algorithms as Scan's.
func ScanTyped[T any](ctx context.Context, c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T]) error {
	return scanTyped(ctx, c, callScanTyped, send, recv, count, t, op)
}

// ExscanTyped is Exscan over count elements of t: rank r's recv layout
// gets the combination of ranks 0..r-1; rank 0's recv is left as it is.
// Otherwise as ScanTyped.
func ExscanTyped[T any](ctx context.Context, c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T]) error {
	return scanTyped(ctx, c, callExscanTyped, send, recv, count, t, op)
}

func scanTyped[T any](ctx context.Context, c *Coll, id callID, send, recv []T, count int, t *ddt.Type, op Op[T]) error {
	if err := c.enter(id); err != nil {
		return err
	}
	es, m, err := reductionType[T](t, count, &op)
	if err != nil {
		return c.fail(err)
	}
	inPlace := send == nil
	rl, err := newLayout("recv", bytesOf(recv), count, t)
	if err != nil {
		return c.fail(err)
	}
	sl := rl
	if !inPlace {
		if sl, err = newLayout("send", bytesOf(send), count, t); err != nil {
			return c.fail(err)
		}
		if overlap(bytesOf(send), bytesOf(recv)) {
			return c.fail(errAlias)
		}
	}
	alg := c.cfg.pick(CollScan, m*es, c.size)
	if c.cfg.det {
		alg = Linear
	}
	if err := c.ready(ctx, callSig{call: id, root: -1, count: m, esize: es, op: op.code, alg: alg}); err != nil {
		return c.fail(err)
	}
	excl := id == callExscanTyped
	// scratch: the packed contribution (unless in place), the packed result
	sn, rn := 0, 0
	if !inPlace && !aligned[T](&sl) {
		sn = m * es
	}
	if !aligned[T](&rl) {
		rn = m * es
	}
	scratch := c.buf(typedSlot, sn+rn)
	res, err := vectorOf[T](&rl, scratch[sn:], inPlace)
	if err != nil {
		return c.fail(err)
	}
	src := res
	if !inPlace {
		if src, err = vectorOf[T](&sl, scratch[:sn], true); err != nil {
			return c.fail(err)
		}
	}
	if alg == Linear {
		err = scanChain(ctx, c, src, res, &op, excl)
	} else {
		err = scanRecDbl(ctx, c, src, res, &op, excl)
	}
	if err != nil {
		return c.fail(err)
	}
	if !aligned[T](&rl) && !(excl && c.rank == 0) {
		if err := rl.unpack(bytesOf(res), 0, count); err != nil {
			return c.fail(err)
		}
	}
	return c.done(nil)
}
