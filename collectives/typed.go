package collectives

import (
	"context"
	"fmt"

	"github.com/weft-hpc/weft/ddt"
)

// BcastTyped broadcasts count elements of datatype t laid out in root's
// buf (buf[0] is displacement 0 of the first element, as in
// endpoint.Comm.SendTyped) into the layout of every other rank's buf: a
// column of a row-major matrix, say, with ddt.Vector. The types may
// differ between ranks as long as their packed data agree in size (MPI's
// type signature rule). A contiguous layout is broadcast in place; any
// other is packed at the root and unpacked at the others, through a
// scratch buffer of the packed size. The algorithms are Bcast's.
func BcastTyped(ctx context.Context, c *Coll, buf []byte, count int, t *ddt.Type, root int) error {
	if err := c.enter(callBcastTyped); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return c.fail(err)
	}
	contig, packed, n, err := typedLayout(buf, count, t)
	if err != nil {
		return c.fail(err)
	}
	if c.hierFor(CollBcast, 0) && !c.bcastPair(n) {
		// the root packs, the ranks of each process share the packed
		// bytes through its leader, each unpacks
		b := contig
		if packed {
			b = c.buf(0, n)
			if c.rank == root {
				if _, err := t.Pack(b, buf, count); err != nil {
					return c.fail(fmt.Errorf("pack %d elements of %s: %w", count, t.Name(), err))
				}
			}
		}
		err := hierBcast(ctx, c, b, root, callSig{call: callBcastTyped, root: root, count: n, esize: 1})
		return c.typedAfter(err, func() error {
			if packed && c.rank != root {
				if _, err := t.Unpack(buf, b, count); err != nil {
					return fmt.Errorf("unpack %d elements of %s: %w", count, t.Name(), err)
				}
			}
			return nil
		})
	}
	alg := c.cfg.pick(CollBcast, n, c.size)
	if err := c.ready(ctx, callSig{call: callBcastTyped, root: root, count: n, esize: 1, alg: alg}); err != nil {
		return c.fail(err)
	}
	if !packed {
		return c.done(c.bcast(ctx, contig, root, alg))
	}
	b := c.buf(0, n)
	if c.rank == root {
		if _, err := t.Pack(b, buf, count); err != nil {
			return c.fail(fmt.Errorf("pack %d elements of %s: %w", count, t.Name(), err))
		}
	}
	if err := c.bcast(ctx, b, root, alg); err != nil {
		return c.fail(err)
	}
	if c.rank != root {
		if _, err := t.Unpack(buf, b, count); err != nil {
			return c.fail(fmt.Errorf("unpack %d elements of %s: %w", count, t.Name(), err))
		}
	}
	return c.done(nil)
}

// typedLayout checks count elements of t against buf and returns the
// bytes they occupy when contiguous (packed false), or packed true; n is
// the packed size.
func typedLayout(buf []byte, count int, t *ddt.Type) (contig []byte, packed bool, n int, err error) {
	if t == nil {
		return nil, false, 0, fmt.Errorf("nil datatype: %w", ErrInvalid)
	}
	if count < 0 {
		return nil, false, 0, fmt.Errorf("count %d: %w", count, ErrInvalid)
	}
	size, err := t.PackSize(count)
	if err != nil {
		return nil, false, 0, err
	}
	n = int(size)
	if n == 0 {
		return nil, false, 0, nil
	}
	s, one, err := t.OneSegment(count)
	if err != nil {
		return nil, false, 0, err
	}
	if !one {
		// pack, after checking that every element lies inside buf (the
		// others would find out only when unpacking)
		if err := t.CheckBounds(count, len(buf)); err != nil {
			return nil, false, 0, err
		}
		return nil, true, n, nil
	}
	if s.Off < 0 || s.Off > int64(len(buf)) || s.Len > int64(len(buf))-s.Off {
		return nil, false, 0, fmt.Errorf("%d elements of %s span bytes [%d, %d) of a %d-byte buffer: %w", count, t.Name(), s.Off, s.Off+s.Len, len(buf), ddt.ErrBounds)
	}
	return buf[s.Off : s.Off+s.Len], false, n, nil
}

// typedAfter completes a typed collective whose data moved through the
// hierarchy (which ended the call): after, the unpacking of what this
// rank received, runs if the call succeeded; its error (a layout checked
// before the call cannot fail to unpack) is this rank's alone.
func (c *Coll) typedAfter(err error, after func() error) error {
	if err != nil {
		return err
	}
	if err := after(); err != nil {
		return fmt.Errorf("collectives: %s (call %d, rank %d of %d): %w", c.call, c.seq, c.rank, c.size, err)
	}
	return nil
}

// typedFail ends a typed call that failed after its start: through the
// hierarchy's end if it took the hierarchical path (the process group
// then fails too), else as every failure.
func (c *Coll) typedFail(err error) error {
	if c.inHier {
		return c.hierEnd(err)
	}
	return c.fail(err)
}
