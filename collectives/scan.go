package collectives

import (
	"context"

	"github.com/weft-hpc/weft/internal/memcopy"
)

// Scan sets rank r's recv to the combination, in rank order, of send on
// ranks 0..r (an inclusive prefix reduction; len(send) = len(recv), the
// same on every rank). In place: send == nil, the contribution in recv.
// Recursive doubling (⌈log₂ p⌉ exchanges, rank order kept for
// non-commutative operations); in deterministic mode a chain from rank 0
// up, p-1 steps, so that rank r's result is bitwise the serial fold.
func Scan[T any](ctx context.Context, c *Coll, send, recv []T, op Op[T]) error {
	return scan(ctx, c, callScan, send, recv, op)
}

// Exscan sets rank r's recv to the combination, in rank order, of send on
// ranks 0..r-1 (an exclusive prefix reduction); rank 0's recv is left as
// it is. Otherwise as Scan.
func Exscan[T any](ctx context.Context, c *Coll, send, recv []T, op Op[T]) error {
	return scan(ctx, c, callExscan, send, recv, op)
}

func scan[T any](ctx context.Context, c *Coll, id callID, send, recv []T, op Op[T]) error {
	if err := c.enter(id); err != nil {
		return err
	}
	es, n, err := elemwise(send, recv, op)
	if err != nil {
		return c.fail(err)
	}
	alg := c.cfg.pick(CollScan, n*es, c.size)
	if c.cfg.det {
		alg = Linear
	}
	if err := c.ready(ctx, callSig{call: id, root: -1, count: n, esize: es, op: op.code, alg: alg}); err != nil {
		return c.fail(err)
	}
	src := send
	if src == nil {
		src = recv
	}
	excl := id == callExscan
	if alg == Linear {
		return c.done(scanChain(ctx, c, src, recv, &op, excl))
	}
	return c.done(scanRecDbl(ctx, c, src, recv, &op, excl))
}

// scanChain: rank r receives the prefix of ranks 0..r-1 from r-1, and
// sends the prefix of 0..r to r+1: the serial left fold.
func scanChain[T any](ctx context.Context, c *Coll, src, res []T, op *Op[T], excl bool) error {
	p, r, n, es := c.size, c.rank, len(res), sizeOf[T]()
	var prev []T
	if r > 0 {
		prev = elems[T](c.buf(1, n*es))
		if err := c.recv(bytesOf(prev), r-1); err != nil {
			return err
		}
		if err := c.wait(ctx); err != nil {
			return err
		}
	}
	var out []T // prefix of 0..r, for r+1
	switch {
	case !excl:
		if r > 0 {
			op.left(prev, src) // the prefix on the left, as the serial fold
			memcopy.CopyOf(res, prev)
		} else {
			memcopy.CopyOf(res, src)
		}
		out = res
	case r == 0:
		out = src
	default:
		if r < p-1 {
			out = elems[T](c.buf(0, n*es))
			memcopy.CopyOf(out, prev)
			op.left(out, src)
		}
		memcopy.CopyOf(res, prev)
	}
	if r == p-1 {
		return nil
	}
	if err := c.send(bytesOf(out), r+1); err != nil {
		return err
	}
	return c.wait(ctx)
}

// scanRecDbl: each rank keeps the combination of its aligned group of
// 2^(k+1) ranks (partial) and its prefix (res); at step k it exchanges
// partial with rank xor 2^k and, if that rank is lower, prepends what it
// receives to both.
func scanRecDbl[T any](ctx context.Context, c *Coll, src, res []T, op *Op[T], excl bool) error {
	p, r, n, es := c.size, c.rank, len(res), sizeOf[T]()
	partial := elems[T](c.buf(0, n*es))
	memcopy.CopyOf(partial, src)
	if !excl {
		memcopy.CopyOf(res, src)
	}
	tmp := elems[T](c.buf(1, n*es))
	var tmp2 []T
	have := !excl // res holds something to prepend to
	for mask := 1; mask < p; mask <<= 1 {
		q := r ^ mask
		if q >= p {
			continue
		}
		if err := c.sendrecv(ctx, bytesOf(partial), q, bytesOf(tmp), q); err != nil {
			return err
		}
		if q > r {
			op.left(partial, tmp)
			continue
		}
		if !have {
			memcopy.CopyOf(res, tmp)
			have = true
			op.right(partial, tmp)
			continue
		}
		if op.commutative {
			op.left(res, tmp)
			op.left(partial, tmp)
			continue
		}
		if tmp2 == nil {
			tmp2 = elems[T](c.buf(2, n*es))
		}
		memcopy.CopyOf(tmp2, tmp)
		op.right(res, tmp)
		op.right(partial, tmp2)
	}
	return nil
}
