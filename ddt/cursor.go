package ddt

import (
	"fmt"
	"math"

	"github.com/weft-hpc/weft/internal/checked"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// Cursor packs or unpacks count elements of a typed buffer piece by piece: each
// call moves at most len(buf) bytes of the packed stream and continues where
// the previous call stopped, at any byte offset (also inside a basic
// element). The bounds of the typed buffer are checked once, when the cursor
// is made. A Cursor is not safe for concurrent use; make one per goroutine.
type Cursor struct {
	t      *Type
	st     *state
	typed  []byte
	base   int64
	count  int
	pos    int64
	total  int64
	unpack bool
}

// NewPacker returns a Cursor that packs count elements of typed, whose
// displacement 0 of element 0 is typed[base], with Cursor.Next.
func (t *Type) NewPacker(typed []byte, base int64, count int) (*Cursor, error) {
	return t.newCursor("NewPacker", typed, base, count, false)
}

// NewUnpacker returns a Cursor that unpacks a stream of count elements into
// typed, whose displacement 0 of element 0 is typed[base], with Cursor.Next.
func (t *Type) NewUnpacker(typed []byte, base int64, count int) (*Cursor, error) {
	return t.newCursor("NewUnpacker", typed, base, count, true)
}

func (t *Type) newCursor(op string, typed []byte, base int64, count int, un bool) (*Cursor, error) {
	s, err := t.committedState(op)
	if err != nil {
		return nil, err
	}
	total, err := t.check(op, s.ir, len(typed), base, count, 0)
	if err != nil {
		return nil, err
	}
	return &Cursor{t: t, st: s, typed: typed, base: base, count: count, total: total, unpack: un}, nil
}

// Next packs the next min(len(buf), Remaining()) stream bytes into buf (a
// packer) or unpacks them from buf (an unpacker) and returns that number.
// It returns 0, nil when the stream is complete.
func (c *Cursor) Next(buf []byte) (int, error) {
	if c == nil {
		return 0, fmt.Errorf("ddt: Cursor.Next: nil cursor: %w", ErrInvalid)
	}
	n := min(int64(len(buf)), c.total-c.pos)
	if n <= 0 {
		return 0, nil
	}
	k, err := c.t.run(c.st, c.unpack, buf[:n], c.typed, c.base, c.count, c.pos)
	c.pos += int64(k)
	return k, err
}

// Offset returns the stream offset of the next byte Next moves (0 for a nil
// cursor).
func (c *Cursor) Offset() int64 {
	if c == nil {
		return 0
	}
	return c.pos
}

// Remaining returns the number of stream bytes not yet moved (0 for a nil
// cursor).
func (c *Cursor) Remaining() int64 {
	if c == nil {
		return 0
	}
	return c.total - c.pos
}

// Done reports whether the whole stream has been moved (true for a nil
// cursor, which has nothing to move).
func (c *Cursor) Done() bool { return c == nil || c.pos == c.total }

// SetOffset moves the cursor to stream offset off (0 ≤ off ≤ total), for example
// to retransmit a segment.
func (c *Cursor) SetOffset(off int64) error {
	if c == nil {
		return fmt.Errorf("ddt: Cursor.SetOffset: nil cursor: %w", ErrInvalid)
	}
	if off < 0 || off > c.total {
		return fmt.Errorf("ddt: SetOffset %d outside [0,%d]: %w", off, c.total, ErrInvalid)
	}
	c.pos = off
	return nil
}

// MaxSegments bounds the segments one Flatten or AppendSegments call
// produces (16 GiB of them): a count of elements whose blocks cannot merge
// into fewer is an error at once, rather than a walk that runs out of
// memory.
const MaxSegments = 1 << 30

// segLimit is the bound on segments that a maxSegs argument sets.
func segLimit(maxSegs int) int {
	if maxSegs <= 0 || maxSegs > MaxSegments {
		return MaxSegments
	}
	return maxSegs
}

// Segment is one contiguous piece of a flattened type: Len bytes at offset
// Off, relative to displacement 0 of element 0.
type Segment struct {
	Off, Len int64
}

// Flatten returns the contiguous blocks of count elements of a committed
// type, in packing order, with touching neighbours merged, for zero-copy
// I/O vectors. At most maxSegs segments are produced (≤ 0: up to
// MaxSegments, which also bounds a larger maxSegs); a type with more
// returns ErrInvalid, so callers can fall back to packing. Count elements
// whose offsets do not fit in an int64 return ErrOverflow.
func (t *Type) Flatten(count, maxSegs int) ([]Segment, error) {
	return t.AppendSegments(nil, count, maxSegs)
}

// AppendSegments is Flatten appending the segments to dst and returning
// the extended slice, so that a caller that flattens layouts over and
// over reuses one slice and allocates nothing. maxSegs bounds the
// segments appended (≤ 0: MaxSegments); past it, or on any other error, dst
// is returned unchanged in length with the error. ExceedsSegments tells
// cheaply, before the walk, whether a layout exceeds the bound.
func (t *Type) AppendSegments(dst []Segment, count, maxSegs int) ([]Segment, error) {
	out, over, err := t.appendSegs(dst, count, maxSegs)
	if over {
		return dst, fmt.Errorf("ddt: Flatten %s: more than %d segments: %w", t.Name(), segLimit(maxSegs), ErrInvalid)
	}
	return out, err
}

// appendSegs is AppendSegments reporting a layout past maxSegs as over
// (dst returned as it was), without building an error.
func (t *Type) appendSegs(dst []Segment, count, maxSegs int) (out []Segment, over bool, err error) {
	s, err := t.committedState("Flatten")
	if err != nil {
		return dst, false, err
	}
	if _, err := t.PackSize(count); err != nil {
		return dst, false, err
	}
	maxSegs = segLimit(maxSegs)
	if t.ExceedsSegments(count, maxSegs) {
		return dst, true, nil // known from the description, without a walk
	}
	ir := s.ir
	if ir.Root == nil || count == 0 {
		return dst, false, nil
	}
	if _, _, ok := span(ir, count); !ok {
		return dst, false, fmt.Errorf("ddt: Flatten %s: %d elements of extent %d: offsets overflow int64: %w",
			t.Name(), count, ir.Extent, ErrOverflow)
	}
	start := len(dst)
	out = dst
	emit := func(off, l int64) {
		if k := len(out); k > start && out[k-1].Off+out[k-1].Len == off {
			out[k-1].Len += l
			return
		}
		if maxSegs > 0 && len(out)-start >= maxSegs {
			over = true
			return
		}
		out = append(out, Segment{off, l})
	}
	for k := int64(0); k < int64(count) && !over; k++ {
		before := len(out)
		walkBlocks(ir.Root, k*ir.Extent, emit, &over)
		if k > 0 && len(out) == before && before > start && !over {
			// Element k only extended the last segment; the layout repeats,
			// so every later element does too (count may be huge).
			out[before-1].Len += (int64(count) - 1 - k) * ir.Size
			break
		}
	}
	if over {
		return dst, true, nil
	}
	return out, false, nil
}

// Blocks returns an upper bound on the number of contiguous blocks count
// elements of a committed type have: the count of Flatten's segments
// before touching neighbours merge (commit merges the blocks of loops
// and vectors; blocks at element boundaries, and entries of an index
// list, may still touch). It costs a walk of the type's description, not
// of its blocks, so a caller can tell cheaply whether a layout's blocks are large
// enough on average to be moved one by one; the result saturates at the
// largest int64.
func (t *Type) Blocks(count int) (int64, error) {
	s, err := t.committedState("Blocks")
	if err != nil {
		return 0, err
	}
	if count < 0 {
		return 0, fmt.Errorf("ddt: Blocks %s: negative count %d: %w", t.Name(), count, ErrInvalid)
	}
	if s.ir.Root == nil {
		return 0, nil
	}
	n, ok := checked.Mul(s.blocks, int64(count))
	if !ok {
		return math.MaxInt64, nil
	}
	return n, nil
}

// ExceedsSegments reports whether count elements of a committed type have
// more than maxSegs blocks by the type's description: Blocks, less the
// one merge each element boundary may make. It costs a few nanoseconds
// and no allocation, where Flatten's refusal walks maxSegs blocks and
// builds an error, so callers use it to pass over layouts too fragmented
// for a list of segments. It is a bound, not Flatten's answer: blocks of
// an index list that touch in packing order are kept apart in the
// description and merged by Flatten, which may then stay within maxSegs.
// An uncommitted type, a negative count or maxSegs ≤ 0 (no limit) gives
// false.
func (t *Type) ExceedsSegments(count, maxSegs int) bool {
	nb, err := t.Blocks(count)
	return err == nil && maxSegs > 0 && nb-int64(max(count-1, 0)) > int64(maxSegs)
}

// OneSegment returns the one contiguous block count elements of a
// committed type occupy, ok false when they occupy several (or none):
// Flatten(count, 1) without its cost, since a layout of several blocks
// by its description (ExceedsSegments) is answered without a walk and
// nothing is allocated. err is what Flatten reports besides (uncommitted
// type, bad count, offsets past int64).
func (t *Type) OneSegment(count int) (s Segment, ok bool, err error) {
	var one [1]Segment
	segs, over, err := t.appendSegs(one[:0], count, 1)
	if err != nil || over || len(segs) != 1 {
		return Segment{}, false, err
	}
	return segs[0], true, nil
}

// nodeBlocks is the number of blocks one instance of n visits, saturated
// at the largest int64. The IR shares subtrees (a struct nesting the same
// type at every level is a DAG of depth d and 2^d paths), so each node is
// counted once.
func nodeBlocks(n *ddtir.Node) int64 {
	return countBlocks(n, map[*ddtir.Node]int64{})
}

func countBlocks(n *ddtir.Node, seen map[*ddtir.Node]int64) int64 {
	if b, ok := seen[n]; ok {
		return b
	}
	sat := func(v int64, ok bool) int64 {
		if !ok {
			return math.MaxInt64
		}
		return v
	}
	var b int64
	switch n.Op {
	case ddtir.OpBlock:
		b = 1
	case ddtir.OpLoop:
		b = sat(checked.Mul(n.Count, countBlocks(n.Child, seen)))
	case ddtir.OpIndex:
		b = sat(checked.Mul(int64(len(n.Offsets)), countBlocks(n.Child, seen)))
	case ddtir.OpBlocks:
		b = int64(len(n.Offsets))
	case ddtir.OpStruct:
		for _, c := range n.Children {
			b = sat(checked.Add(b, countBlocks(c, seen)))
		}
	}
	seen[n] = b
	return b
}

func walkBlocks(n *ddtir.Node, o int64, emit func(off, l int64), stop *bool) {
	if *stop {
		return
	}
	o += n.Disp
	switch n.Op {
	case ddtir.OpBlock:
		emit(o, n.Len)
	case ddtir.OpLoop:
		for i := int64(0); i < n.Count && !*stop; i++ {
			walkBlocks(n.Child, o+i*n.Stride, emit, stop)
		}
	case ddtir.OpIndex:
		for _, off := range n.Offsets {
			if *stop {
				return
			}
			walkBlocks(n.Child, o+off, emit, stop)
		}
	case ddtir.OpBlocks:
		for i, off := range n.Offsets {
			if *stop {
				return
			}
			emit(o+off, n.Lens[i])
		}
	case ddtir.OpStruct:
		for i, c := range n.Children {
			if *stop {
				return
			}
			walkBlocks(c, o+n.Offsets[i], emit, stop)
		}
	}
}
