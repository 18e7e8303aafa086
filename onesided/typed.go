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
// transfer. The libfabric path packs the origin once and issues one RMA
// write per contiguous block of the target type (ddt Flatten). The packed
// copy is owned by the window, so origin may be reused when PutTyped
// returns.
func (w *Window) PutTyped(target, offset int, origin []byte, originCount int, originType *ddt.Type,
	targetCount int, targetType *ddt.Type) error {
	n, err := w.typedPrep("PutTyped", target, originCount, originType, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	if p := w.peers[target]; p != nil {
		return transcode("PutTyped", p, int64(offset), targetCount, targetType, origin, 0, originCount, originType, n, false)
	}
	packed := make([]byte, n)
	if _, err := originType.Pack(packed, origin, originCount); err != nil {
		return fmt.Errorf("onesided: PutTyped: pack origin: %w: %w", ErrInvalid, err)
	}
	segs, err := w.typedSegments("PutTyped", target, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	pos := int64(0)
	for _, s := range segs {
		if err := w.net.put(target, offset+int(s.Off)+ctrlBytes, packed[pos:pos+s.Len]); err != nil {
			return err
		}
		pos += s.Len
	}
	return nil
}

// GetTyped is Get with derived datatypes (MPI_Get with origin and target
// datatypes): targetCount elements of targetType at offset in target's
// region are read into originCount elements of originType in origin. Unlike
// Get it waits until origin holds the data (on the libfabric path it
// flushes target, then unpacks).
func (w *Window) GetTyped(ctx context.Context, target, offset int, origin []byte, originCount int,
	originType *ddt.Type, targetCount int, targetType *ddt.Type) error {
	n, err := w.typedPrep("GetTyped", target, originCount, originType, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	if p := w.peers[target]; p != nil {
		return transcode("GetTyped", origin, 0, originCount, originType, p, int64(offset), targetCount, targetType, n, true)
	}
	packed := make([]byte, n)
	segs, err := w.typedSegments("GetTyped", target, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	pos := int64(0)
	for _, s := range segs {
		if err := w.net.get(target, offset+int(s.Off)+ctrlBytes, packed[pos:pos+s.Len]); err != nil {
			return err
		}
		pos += s.Len
	}
	if err := w.net.flush(ctx, target); err != nil {
		return err
	}
	if _, err := originType.Unpack(origin, packed, originCount); err != nil {
		return fmt.Errorf("onesided: GetTyped: unpack origin: %w: %w", ErrInvalid, err)
	}
	return nil
}

// typedPrep validates a typed transfer and returns its packed size.
func (w *Window) typedPrep(op string, target, originCount int, originType *ddt.Type,
	offset, targetCount int, targetType *ddt.Type) (int, error) {
	if err := w.check(op, target, 0, 0); err != nil {
		return 0, err
	}
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
	if segs, err := srcType.Flatten(srcCount, 1); err == nil && len(segs) == 1 {
		lo, hi := srcBase+segs[0].Off, srcBase+segs[0].Off+segs[0].Len
		if lo < 0 || hi > int64(len(src)) {
			return fmt.Errorf("onesided: %s: bytes [%d, %d) outside a %d-byte buffer: %w", op, lo, hi, len(src), srcErr)
		}
		if _, err := dstType.UnpackRange(dst, src[lo:hi], dstBase, dstCount, 0); err != nil {
			return fmt.Errorf("onesided: %s: %w: %w", op, dstErr, err)
		}
		return nil
	}
	if segs, err := dstType.Flatten(dstCount, 1); err == nil && len(segs) == 1 {
		lo, hi := dstBase+segs[0].Off, dstBase+segs[0].Off+segs[0].Len
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

// typedSegments flattens the target layout and checks every block is in
// range.
func (w *Window) typedSegments(op string, target, offset, count int, t *ddt.Type) ([]ddt.Segment, error) {
	segs, err := t.Flatten(count, 0)
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
