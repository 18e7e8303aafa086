package onesided

import (
	"context"
	"errors"
	"fmt"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/checked"
	"sync"
)

// PutTyped is Put with derived datatypes on both sides (MPI_Put with origin
// and target datatypes): originCount elements of originType are taken from
// origin (origin[0] is displacement 0 of element 0) and stored as
// targetCount elements of targetType starting at offset in target's region.
// Both types must be committed and carry the same number of bytes.
//
// Direct-store targets are written straight from the origin: a
// contiguous side is read or written in place, otherwise the data goes
// through a 64 KiB piece at a time (packed from the origin, unpacked into
// the shared region while it is in the cache), never a copy of the whole
// transfer. On the libfabric path a contiguous origin, or one whose
// blocks average at least WEFT_TUNE's zcblock (64 KiB), is written straight from its blocks with
// fi_writev to each contiguous block of the target type (at most the
// provider's iov_limit origin pieces per write; the origin is registered
// through the MR cache); an origin of smaller blocks is packed 64 KiB at a
// time into the window's registered chunk buffers, each chunk written as
// soon as it is packed. As with Put, origin must not be modified until
// the next flush of target.
func (w *Window) PutTyped(target, offset int, origin []byte, originCount int, originType *ddt.Type,
	targetCount int, targetType *ddt.Type) error {
	n, err := w.typedPrep("PutTyped", target, originCount, originType, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	w.count(opPut, target, n)
	if p := w.peers[target]; p != nil {
		return transcode("PutTyped", p, int64(offset), targetCount, targetType, origin, 0, originCount, originType, n, false)
	}
	segs, err := w.typedSegments("PutTyped", target, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	return w.netTyped(context.Background(), "PutTyped", target, offset, segs, origin, originCount, originType, n, false)
}

// GetTyped is Get with derived datatypes (MPI_Get with origin and target
// datatypes): targetCount elements of targetType at offset in target's
// region are read into originCount elements of originType in origin. Unlike
// Get it waits until origin holds the data. On the libfabric path the
// target's blocks are read with fi_readv straight into the origin's
// blocks when it is contiguous or its blocks average at least zcblock, else
// 64 KiB at a time into a registered chunk buffer that is unpacked into
// origin as soon as its reads complete.
func (w *Window) GetTyped(ctx context.Context, target, offset int, origin []byte, originCount int,
	originType *ddt.Type, targetCount int, targetType *ddt.Type) error {
	defer w.after(w.during(ctx))
	n, err := w.typedPrep("GetTyped", target, originCount, originType, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	w.count(opGet, target, n)
	if p := w.peers[target]; p != nil {
		return transcode("GetTyped", origin, 0, originCount, originType, p, int64(offset), targetCount, targetType, n, true)
	}
	segs, err := w.typedSegments("GetTyped", target, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	if err := w.netTyped(ctx, "GetTyped", target, offset, segs, origin, originCount, originType, n, true); err != nil {
		return err
	}
	return w.net.flush(ctx, target)
}

// netTyped moves a typed transfer of n bytes between the origin layout
// and the target blocks segs on the libfabric path: the origin's own
// blocks by iovec RMA when it is contiguous or its blocks are large,
// else through the window's chunk buffers (fabtyped.go).
func (w *Window) netTyped(ctx context.Context, op string, target, offset int, segs []ddt.Segment,
	origin []byte, count int, t *ddt.Type, n int, get bool) error {
	if n == 0 {
		return nil
	}
	ts := &w.typed
	defer ts.done()
	if pieces, err := ts.originPieces(op, origin, count, t, n); err != nil {
		return err
	} else if pieces != nil {
		return w.net.typedVec(target, offset, segs, pieces, get)
	}
	if ts.pack == nil { // bound once: a method value allocates
		ts.pack, ts.unpack = ts.host.pack, ts.host.unpack
	}
	ts.host = hostChunks{op: op, t: t, origin: origin, count: count}
	if get {
		return w.net.typedChunks(ctx, target, offset, segs, n, nil, ts.unpack)
	}
	return w.net.typedChunks(ctx, target, offset, segs, n, ts.pack, nil)
}

// typedScratch is what PutTyped and GetTyped on the libfabric path keep
// between calls, so that a repeated transfer allocates nothing: the
// target's and the origin's blocks, the origin's blocks as slices, and
// the packing of the chunk path with its methods bound once.
type typedScratch struct {
	tsegs  []ddt.Segment
	osegs  []ddt.Segment
	pieces [][]byte
	host   hostChunks
	pack   chunkPack
	unpack chunkUnpack
}

// maxKeptSegs is the most blocks typedScratch keeps room for between
// calls: a list past it (a layout of many small target blocks) is let go.
const maxKeptSegs = 1 << 14

// done lets go of the user's memory and of lists grown past maxKeptSegs.
func (s *typedScratch) done() {
	s.host = hostChunks{}
	clear(s.pieces)
	s.pieces = s.pieces[:0]
	if cap(s.tsegs) > maxKeptSegs {
		s.tsegs = nil
	}
	if cap(s.osegs) > maxKeptSegs {
		s.osegs, s.pieces = nil, nil
	}
}

// hostChunks packs a typed transfer's origin into the chunks of the
// libfabric path (Put), or unpacks them into it (Get).
type hostChunks struct {
	op     string
	t      *ddt.Type
	origin []byte
	count  int
}

func (h *hostChunks) pack(b []byte, off int) (func() error, error) {
	if _, err := h.t.PackRange(b, h.origin, 0, h.count, int64(off)); err != nil {
		return nil, fmt.Errorf("onesided: %s: pack origin: %w: %w", h.op, ErrInvalid, err)
	}
	return nil, nil
}

func (h *hostChunks) unpack(b []byte, off int) (func() error, error) {
	if _, err := h.t.UnpackRange(h.origin, b, 0, h.count, int64(off)); err != nil {
		return nil, fmt.Errorf("onesided: %s: unpack origin: %w: %w", h.op, ErrInvalid, err)
	}
	return nil, nil
}

// originPieces returns the origin's blocks as slices of origin when it
// is one block or its blocks average at least zcBlock bytes, else nil.
func (s *typedScratch) originPieces(op string, origin []byte, count int, t *ddt.Type, n int) ([][]byte, error) {
	limit := max(1, min(1<<16, n/zcBlock))
	if t.ExceedsSegments(count, limit) {
		return nil, nil
	}
	segs, err := t.AppendSegments(s.osegs[:0], count, limit)
	s.osegs = segs
	if err != nil || len(segs) == 0 || (len(segs) > 1 && n/len(segs) < zcBlock) {
		return nil, nil
	}
	out := s.pieces[:0]
	for _, g := range segs {
		if g.Off < 0 || g.Off > int64(len(origin)) || g.Len > int64(len(origin))-g.Off {
			return nil, fmt.Errorf("onesided: %s: origin block [%d, %d) outside its %d bytes: %w: %w",
				op, g.Off, g.Off+g.Len, len(origin), ErrInvalid, ddt.ErrBounds)
		}
		out = append(out, origin[g.Off:g.Off+g.Len:g.Off+g.Len])
	}
	s.pieces = out
	return out, nil
}

// typedPrep validates a typed transfer and returns its packed size.
func (w *Window) typedPrep(op string, target, originCount int, originType *ddt.Type,
	offset, targetCount int, targetType *ddt.Type) (int, error) {
	if err := w.check(op, target, 0, 0); err != nil {
		return 0, err
	}
	on, err := typedBytes(op, originCount, originType, targetCount, targetType)
	if err != nil {
		return 0, err
	}
	if offset < 0 || offset > w.sizes[target] {
		return 0, fmt.Errorf("onesided: %s: offset %d outside rank %d's %d bytes: %w", op, offset, target, w.sizes[target], ErrOutOfRange)
	}
	// A target layout's entries must not overlap (as in MPI), so it cannot
	// carry more bytes than the target holds from offset; checking before
	// the packed buffer is made keeps an overlapping layout from asking for
	// more memory than exists.
	if room := int64(w.sizes[target] - offset); on > room {
		return 0, fmt.Errorf("onesided: %s: the layouts carry %d bytes, more than rank %d's %d bytes from offset %d: %w", op, on, target, room, offset, ErrOutOfRange)
	}
	return int(on), nil
}

// typedBytes checks a typed transfer's datatypes (committed, the same
// packed size) and returns the bytes it carries.
func typedBytes(op string, originCount int, originType *ddt.Type, targetCount int, targetType *ddt.Type) (int64, error) {
	if originType == nil || targetType == nil {
		return 0, fmt.Errorf("onesided: %s: nil datatype: %w", op, ErrInvalid)
	}
	if !originType.Committed() || !targetType.Committed() {
		return 0, fmt.Errorf("onesided: %s: datatypes must be committed: %w", op, ErrInvalid)
	}
	on, err := originType.PackSize(originCount)
	if err != nil {
		return 0, fmt.Errorf("onesided: %s: origin: %w: %w", op, ErrInvalid, err)
	}
	tn, err := targetType.PackSize(targetCount)
	if err != nil {
		return 0, fmt.Errorf("onesided: %s: target: %w: %w", op, ErrInvalid, err)
	}
	if on != tn {
		return 0, fmt.Errorf("onesided: %s: origin carries %d bytes, target %d: %w", op, on, tn, ErrInvalid)
	}
	return on, nil
}

// pieceBytes is the piece a typed transfer between two non-contiguous
// layouts moves at a time: it stays in the cache from pack to unpack.
const pieceBytes = 64 << 10

var pieces = sync.Pool{New: func() any { b := make([]byte, pieceBytes); return &b }}

// transcode moves the n-byte stream of srcCount elements of srcType at
// src[srcBase] into dstCount elements of dstType at dst[dstBase]: in place
// when either side is contiguous, else a piece at a time. srcIsTarget says
// which side is the window's (its bounds errors are ErrOutOfRange, the
// origin's ErrInvalid). Every byte of both layouts is checked against its
// slice by the first call on each side, before anything moves.
func transcode(op string, dst []byte, dstBase int64, dstCount int, dstType *ddt.Type,
	src []byte, srcBase int64, srcCount int, srcType *ddt.Type, n int, srcIsTarget bool) error {
	srcErr, dstErr := ErrInvalid, ErrOutOfRange
	if srcIsTarget {
		srcErr, dstErr = ErrOutOfRange, ErrInvalid
	}
	if n == 0 {
		return nil
	}
	if seg, ok, err := srcType.OneSegment(srcCount); err == nil && ok {
		lo, hi := srcBase+seg.Off, srcBase+seg.Off+seg.Len
		if lo < 0 || hi > int64(len(src)) {
			return fmt.Errorf("onesided: %s: bytes [%d, %d) outside a %d-byte buffer: %w", op, lo, hi, len(src), srcErr)
		}
		if _, err := dstType.UnpackRange(dst, src[lo:hi], dstBase, dstCount, 0); err != nil {
			return fmt.Errorf("onesided: %s: %w: %w", op, dstErr, err)
		}
		return nil
	}
	if seg, ok, err := dstType.OneSegment(dstCount); err == nil && ok {
		lo, hi := dstBase+seg.Off, dstBase+seg.Off+seg.Len
		if lo < 0 || hi > int64(len(dst)) {
			return fmt.Errorf("onesided: %s: bytes [%d, %d) outside a %d-byte buffer: %w", op, lo, hi, len(dst), dstErr)
		}
		if _, err := srcType.PackRange(dst[lo:hi], src, srcBase, srcCount, 0); err != nil {
			return fmt.Errorf("onesided: %s: %w: %w", op, srcErr, err)
		}
		return nil
	}
	bp := pieces.Get().(*[]byte)
	defer pieces.Put(bp)
	piece := *bp
	for off := 0; off < n; {
		k := min(n-off, len(piece))
		if _, err := srcType.PackRange(piece[:k], src, srcBase, srcCount, int64(off)); err != nil {
			return fmt.Errorf("onesided: %s: %w: %w", op, srcErr, err)
		}
		if _, err := dstType.UnpackRange(dst, piece[:k], dstBase, dstCount, int64(off)); err != nil {
			return fmt.Errorf("onesided: %s: %w: %w", op, dstErr, err)
		}
		off += k
	}
	return nil
}

// typedSegments flattens the target layout (into the window's scratch,
// valid until the next typed transfer) and checks every block is in
// range.
func (w *Window) typedSegments(op string, target, offset, count int, t *ddt.Type) ([]ddt.Segment, error) {
	segs, err := t.AppendSegments(w.typed.tsegs[:0], count, 0)
	w.typed.tsegs = segs
	if err != nil {
		if errors.Is(err, ddt.ErrOverflow) { // offsets past int64: past any region
			return nil, fmt.Errorf("onesided: %s: %w: %w", op, ErrOutOfRange, err)
		}
		return nil, fmt.Errorf("onesided: %s: %w: %w", op, ErrInvalid, err)
	}
	for _, s := range segs {
		off, ok := checked.Add(int64(offset), s.Off)
		if !ok || off != int64(int(off)) || s.Len != int64(int(s.Len)) {
			return nil, fmt.Errorf("onesided: %s: block at %d+%d outside rank %d's region: %w", op, offset, s.Off, target, ErrOutOfRange)
		}
		if err := w.check(op, target, int(off), int(s.Len)); err != nil {
			return nil, err
		}
	}
	return segs, nil
}

// AccumulateTyped is Accumulate with derived datatypes on both sides
// (MPI_Accumulate with origin and target datatypes; the strided
// accumulate of ARMCI and Global Arrays): originCount elements of
// originType taken from origin are combined with op, element by element
// and each atomically, into targetCount elements of targetType starting
// at offset in target's region. Both layouts must carry the same number
// of bytes, a whole number of t's elements, and every contiguous block of
// the target layout must start t-aligned and hold whole elements (else
// ErrInvalid, with nothing applied). As with Accumulate, the update is
// complete at the target after a flush, and origin may be reused at once.
func (w *Window) AccumulateTyped(target, offset int, t AtomicType, op Op, origin []byte, originCount int, originType *ddt.Type,
	targetCount int, targetType *ddt.Type) error {
	if err := checkOp(t, op); err != nil || op == OpNoOp {
		return fmt.Errorf("onesided: AccumulateTyped(%v, %v): %w", op, t, ErrInvalid)
	}
	n, err := w.typedPrep("AccumulateTyped", target, originCount, originType, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	sz := t.Size()
	if n%sz != 0 {
		return fmt.Errorf("onesided: AccumulateTyped: %d bytes is not a whole number of %v: %w", n, t, ErrInvalid)
	}
	segs, err := w.typedSegments("AccumulateTyped", target, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	for _, s := range segs {
		if (offset+int(s.Off))%sz != 0 || int(s.Len)%sz != 0 {
			return fmt.Errorf("onesided: AccumulateTyped: target block [%d, %d) is not whole %v elements at an aligned offset: %w",
				offset+int(s.Off), offset+int(s.Off+s.Len), t, ErrInvalid)
		}
	}
	w.count(opAtomic, target, n)
	return accumulateStream("AccumulateTyped", t, n, segs, origin, originCount, originType, func(off int, data []byte) error {
		return w.accumulate(target, offset+off, t, op, data) // each block checked above
	})
}

// accumulateStream applies a typed accumulate of n bytes (whole elements
// of t) to the target blocks segs: the origin's bytes in stream order,
// in place when they are one block, else packed a piece at a time, each
// run of a block handed to apply with its offset from the layout's
// start.
func accumulateStream(opName string, t AtomicType, n int, segs []ddt.Segment, origin []byte, originCount int,
	originType *ddt.Type, apply func(off int, data []byte) error) error {
	sz := t.Size()
	if err := originType.CheckBounds(originCount, len(origin)); err != nil {
		return fmt.Errorf("onesided: %s: origin: %w: %w", opName, ErrInvalid, err)
	}
	var whole []byte
	if seg, ok, err := originType.OneSegment(originCount); err == nil && ok && n > 0 {
		if seg.Off < 0 || seg.Off+seg.Len > int64(len(origin)) {
			return fmt.Errorf("onesided: %s: origin bytes [%d, %d) outside its %d bytes: %w", opName, seg.Off, seg.Off+seg.Len, len(origin), ErrInvalid)
		}
		whole = origin[seg.Off : seg.Off+seg.Len]
	}
	var piece []byte
	if whole == nil && n > 0 {
		bp := pieces.Get().(*[]byte)
		defer pieces.Put(bp)
		piece = (*bp)[:pieceBytes/sz*sz]
	}
	pos := 0 // stream bytes applied so far
	for _, s := range segs {
		for done := 0; done < int(s.Len); {
			k := int(s.Len) - done
			var data []byte
			if whole != nil {
				data = whole[pos : pos+k]
			} else {
				k = min(k, len(piece))
				if _, err := originType.PackRange(piece[:k], origin, 0, originCount, int64(pos)); err != nil {
					return fmt.Errorf("onesided: %s: pack origin: %w: %w", opName, ErrInvalid, err)
				}
				data = piece[:k]
			}
			if err := apply(int(s.Off)+done, data); err != nil {
				return err
			}
			done, pos = done+k, pos+k
		}
	}
	return nil
}
