package onesided

// Typed transfers on the libfabric path without a copy of the whole
// transfer (typed.go decides which of these a transfer takes):
//
//   - iovec RMA: the origin's blocks (a contiguous origin, or one whose
//     blocks average at least zcblock bytes, WEFT_TUNE) are written to, or read
//     from, each contiguous block of the target layout with fi_writev /
//     fi_readv, at most the provider's iov_limit origin pieces per
//     operation; the origin is registered once (MR cache) for the call;
//   - chunks: an origin of small blocks is packed into, or unpacked
//     from, registered chunk buffers of the window (chunkCount ×
//     chunkBytes), a chunk at a time: a Put's chunk goes out as soon as
//     it is packed; a Get posts the reads of the next chunk before it
//     waits for and unpacks the current one (two chunks in flight). A
//     chunk is free again once its transfer is done with it and every
//     operation posted on it has completed, in whatever order the
//     provider completes them (chunkUse).

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/fabric"
)

const (
	chunkBytes = 64 << 10 // bytes per chunk buffer
	chunkCount = 4        // chunk buffers per window
)

// zcBlock is the average origin block size from which a typed transfer
// moves the origin's blocks by iovec RMA instead of packing them into
// chunks: WEFT_TUNE's zcblock, the endpoint package's threshold (one RMA
// operation per block costs what the pipeline costs per byte there).
var zcBlock = int(max(tune.ZCBlock, 1))

// chunkUse is the state of one chunk buffer while it is taken: refs
// counts the operations posted on it that have not completed, plus one
// while the transfer that took it still uses it; the chunk is free again
// when refs reaches zero. err is the first error an operation on it
// completed with.
type chunkUse struct {
	refs int
	err  error
}

// unrefChunk drops one reference to chunk i (an operation on it
// completed with err, or its transfer is done with it) and frees the
// chunk when none is left.
func (f *fabPath) unrefChunk(i int, err error) {
	u := &f.chunkUse[i]
	if err != nil && u.err == nil {
		u.err = err
	}
	if u.refs--; u.refs == 0 {
		*u = chunkUse{}
		f.freeChunks = append(f.freeChunks, i)
	}
}

// chunkOp tracks an operation to target on chunk i: its completion
// drops the reference it takes.
func (f *fabPath) chunkOp(target, i int) opHandle {
	f.chunkUse[i].refs++
	return f.pend.track(target, slotCount+i, nil)
}

// waitChunk drives progress until every operation posted on chunk i has
// completed (only its transfer's reference left), then returns the
// first error one of them completed with.
func (f *fabPath) waitChunk(ctx context.Context, i int) error {
	wt := f.w.newWaiter(0)
	for f.chunkUse[i].refs > 1 {
		if err := f.progress(); err != nil {
			return err
		}
		if err := wt.pause(ctx); err != nil {
			return err
		}
	}
	return f.chunkUse[i].err
}

// chunk takes a free chunk buffer (allocated on first use), driving
// progress until one is free, and returns it with its index i; the
// caller holds the one reference until unrefChunk(i, nil).
func (f *fabPath) chunk() ([]byte, int, error) {
	if f.chunks == nil {
		b, err := f.dom.Alloc(chunkBytes * chunkCount)
		if err != nil {
			return nil, -1, fmt.Errorf("onesided: chunk buffers: %w", err)
		}
		f.chunks = b
		for i := chunkCount - 1; i >= 0; i-- {
			f.freeChunks = append(f.freeChunks, i)
		}
	}
	wt := f.w.newWaiter(f.w.opts.timeout)
	for len(f.freeChunks) == 0 {
		if err := f.progress(); err != nil {
			return nil, -1, err
		}
		if err := wt.pause(f.waitCtx()); err != nil {
			return nil, -1, err
		}
	}
	i := f.freeChunks[len(f.freeChunks)-1]
	f.freeChunks = f.freeChunks[:len(f.freeChunks)-1]
	f.chunkUse[i] = chunkUse{refs: 1}
	return f.chunks.Bytes()[i*chunkBytes : (i+1)*chunkBytes], i, nil
}

// iovLimit is the most local pieces one vectored operation takes.
func (f *fabPath) iovLimit() int { return max(1, min(f.info.IOVLimit, fabric.MaxIOV)) }

// regKeep registers b (AccessAll) into a handle of the path's pool of
// closed handles, or a new one: a cache hit then allocates nothing. The
// handle goes back to the pool when closed by unreg (or by the
// completion of the operation that holds it).
func (f *fabPath) regKeep(b []byte) (*fabric.MR, error) {
	if n := len(f.mrPool); n > 0 {
		m := f.mrPool[n-1]
		if err := f.dom.RegisterInto(m, b, fabric.AccessAll); err != nil {
			return nil, err
		}
		f.mrPool[n-1] = nil
		f.mrPool = f.mrPool[:n-1]
		return m, nil
	}
	return f.dom.Register(b, fabric.AccessAll)
}

// unreg closes a handle of regKeep and returns it to the pool.
func (f *fabPath) unreg(m *fabric.MR) {
	_ = m.Close()
	f.mrPool = append(f.mrPool, m)
}

// vecOp issues one vectored write (get false) or read of the pieces to
// or from target's contiguous range at off (a byte offset of its
// region, control words included).
func (f *fabPath) vecOp(target, off int, pieces [][]byte, get bool) error {
	if len(pieces) == 1 && len(pieces[0]) <= slotSize {
		if get {
			return f.get(target, off, pieces[0])
		}
		return f.put(target, off, pieces[0])
	}
	lo, hi := pieces[0], pieces[len(pieces)-1]
	span := spanOf(lo, hi)
	var mr *fabric.MR
	desc := f.mr.Desc()
	if f.inRegion(span) < 0 {
		var err error
		if mr, err = f.regKeep(span); err != nil {
			return err
		}
		desc = mr.Desc()
	}
	var iov [fabric.MaxIOV]fabric.IOV
	for i, p := range pieces {
		iov[i] = fabric.IOV{Buf: p, Desc: desc}
	}
	id := f.pend.track(target, -1, mr)
	if !get {
		f.markDirty(target)
	}
	return f.post(id, func() error {
		if get {
			return f.ep.ReadV(iov[:len(pieces)], f.addrs[target], f.raddr(target, off), f.key(target, off), id)
		}
		return f.ep.WriteV(iov[:len(pieces)], f.addrs[target], f.raddr(target, off), f.key(target, off), id)
	})
}

// typedVec moves the origin pieces (the stream in order) to or from the
// target blocks segs at offset (control words excluded) by vectored
// operations. The origin's span is registered for the call, so that the
// registrations of its operations are cache hits; each operation in
// flight holds its own.
func (f *fabPath) typedVec(target, offset int, segs []ddt.Segment, pieces [][]byte, get bool) error {
	if span := spanOf(pieces[0], pieces[len(pieces)-1]); len(span) > 0 && f.inRegion(span) < 0 {
		mr, err := f.regKeep(span)
		if err != nil {
			return fmt.Errorf("onesided: register origin: %w", err)
		}
		defer f.unreg(mr)
	}
	lim := f.iovLimit()
	pi, poff := 0, 0
	var op [fabric.MaxIOV][]byte
	for _, s := range segs {
		toff, left := int(s.Off), int(s.Len)
		for left > 0 {
			n, k := 0, 0
			for n < lim && left > 0 {
				p := pieces[pi][poff:]
				m := min(len(p), left)
				op[n] = p[:m]
				n, k, left, poff = n+1, k+m, left-m, poff+m
				if poff == len(pieces[pi]) {
					pi, poff = pi+1, 0
				}
			}
			if err := f.vecOp(target, offset+toff+f.w.netOff, op[:n], get); err != nil {
				return err
			}
			toff += k
		}
	}
	return nil
}

// chunkPack packs the stream bytes from off into b, a chunk buffer. It
// either packs before it returns (wait nil) or starts the pack and
// returns wait, which completes it (a GPU kernel on its stream): then the
// packs of the next free chunks are started before the first is waited
// for and written.
type chunkPack func(b []byte, off int) (wait func() error, err error)

// chunkUnpack unpacks b, a chunk buffer holding the stream bytes from
// off, into the origin: before it returns (wait nil), or it starts the
// unpack and returns wait, which completes it; the chunk is not reused
// until then.
type chunkUnpack func(b []byte, off int) (wait func() error, err error)

// typedChunks moves n stream bytes between the origin (through pack or
// unpack, at a stream offset) and the target blocks segs at offset, a
// chunk at a time. A Put's chunk goes out as soon as it is packed; a Get
// keeps two chunks in flight: the reads of the next chunk are posted
// before the current one is waited for and unpacked, so the transfer of
// one overlaps the unpack of the other. On every path the call gives up
// its reference to each chunk it took; a chunk whose operations are
// still in flight stays taken until the last of them completes.
func (f *fabPath) typedChunks(ctx context.Context, target, offset int, segs []ddt.Segment, n int,
	pack chunkPack, unpack chunkUnpack) error {
	if pack != nil {
		return f.putChunks(ctx, target, offset, segs, n, pack)
	}
	si, soff := 0, 0
	var prev getChunk // a Get's chunk in flight, not yet unpacked (idx < 0: none)
	prev.idx = -1
	var pend chunkRing // chunks whose unpack was started, oldest first
	// retire completes started unpacks, oldest first: all of them, or
	// while no chunk is free (f.chunk would wait for one in vain).
	retire := func(all bool) error {
		var first error
		for pend.n > 0 && (all || len(f.freeChunks) == 0) {
			h := pend.pop()
			if err := h.wait(); err != nil && first == nil {
				first = err
			}
			f.unrefChunk(h.idx, nil)
		}
		return first
	}
	finish := func(g *getChunk) error {
		wait, err := f.finishGet(ctx, g, unpack)
		if wait != nil {
			pend.push(startedChunk{idx: g.idx, wait: wait})
		}
		return err
	}
	for pos := 0; pos < n; {
		if err := retire(false); err != nil {
			return errors.Join(f.abandon(&prev, err), retire(true))
		}
		buf, ci, err := f.chunk()
		if err != nil {
			return errors.Join(f.abandon(&prev, err), retire(true))
		}
		k := min(chunkBytes, n-pos)
		c := buf[:k]
		if err := f.postChunk(ctx, target, offset, segs, &si, &soff, c, ci, false); err != nil {
			return errors.Join(f.abandon(&prev, err), retire(true))
		}
		cur := getChunk{b: c, pos: pos, idx: ci}
		if prev.idx >= 0 {
			if err := finish(&prev); err != nil {
				return errors.Join(f.abandon(&cur, err), retire(true))
			}
		}
		prev = cur
		pos += k
	}
	var err error
	if prev.idx >= 0 {
		err = finish(&prev)
	}
	return errors.Join(err, retire(true))
}

// startedChunk is a chunk whose pack (Put) or unpack (Get) was started.
type startedChunk struct {
	c    []byte
	idx  int
	wait func() error // nil: done already
}

// chunkRing is a queue of started chunks, oldest first: each holds a
// chunk buffer, so there are never more than chunkCount.
type chunkRing struct {
	a    [chunkCount]startedChunk
	h, n int
}

func (r *chunkRing) push(c startedChunk) {
	r.a[(r.h+r.n)%chunkCount] = c
	r.n++
}

func (r *chunkRing) pop() startedChunk {
	c := r.a[r.h]
	r.a[r.h] = startedChunk{}
	r.h, r.n = (r.h+1)%chunkCount, r.n-1
	return c
}

// last is the newest started chunk (n > 0).
func (r *chunkRing) last() *startedChunk { return &r.a[(r.h+r.n-1)%chunkCount] }

// putChunks is typedChunks for a Put: each chunk is written once packed.
// Packs that complete later (wait) are started for every free chunk
// before the oldest is waited for, so that the packs of the next chunks
// run while the writes of the previous ones go out.
func (f *fabPath) putChunks(ctx context.Context, target, offset int, segs []ddt.Segment, n int, pack chunkPack) error {
	si, soff := 0, 0
	var q chunkRing
	fail := func(err error) error { // the chunks packed or being packed are not written
		for q.n > 0 {
			h := q.pop()
			if h.wait != nil {
				_ = h.wait()
			}
			f.unrefChunk(h.idx, nil)
		}
		return err
	}
	for pos := 0; pos < n || q.n > 0; {
		for pos < n && (q.n == 0 || len(f.freeChunks) > 0 && q.last().wait != nil) {
			buf, ci, err := f.chunk()
			if err != nil {
				return fail(err)
			}
			k := min(chunkBytes, n-pos)
			wait, err := pack(buf[:k], pos)
			if err != nil {
				f.unrefChunk(ci, nil)
				return fail(err)
			}
			q.push(startedChunk{c: buf[:k], idx: ci, wait: wait})
			pos += k
		}
		h := q.pop()
		if h.wait != nil {
			if err := h.wait(); err != nil {
				f.unrefChunk(h.idx, nil)
				return fail(err)
			}
		}
		if err := f.postChunk(ctx, target, offset, segs, &si, &soff, h.c, h.idx, true); err != nil {
			return fail(err)
		}
		f.unrefChunk(h.idx, nil)
	}
	return nil
}

// postChunk posts the writes (put) or reads of chunk c, index ci, to or
// from the target blocks segs from (*si, *soff) on, one operation per
// target block piece the chunk covers, each holding a reference to the
// chunk until it completes. A failed post drops its reference and waits
// for the operations posted before it (on this chunk and earlier ones),
// so that the call returns with none of them in flight, and gives up the
// caller's reference to c; a chunk they never complete on stays taken
// rather than be reused under them.
func (f *fabPath) postChunk(ctx context.Context, target, offset int, segs []ddt.Segment, si, soff *int, c []byte, ci int, put bool) error {
	k := len(c)
	for done := 0; done < k; {
		s := segs[*si]
		m := min(int(s.Len)-*soff, k-done)
		piece := c[done : done+m]
		roff := offset + int(s.Off) + *soff + f.w.netOff
		raddr, rkey := f.raddr(target, roff), f.key(target, roff)
		id := f.chunkOp(target, ci)
		if put {
			f.markDirty(target)
		}
		if err := f.post(id, func() error {
			if put {
				return f.ep.Write(piece, f.chunks.Desc(), f.addrs[target], raddr, rkey, id)
			}
			return f.ep.Read(piece, f.chunks.Desc(), f.addrs[target], raddr, rkey, id)
		}); err != nil {
			if werr := f.waitIssued(ctx, f.pend.seq); werr != nil {
				err = fmt.Errorf("%w (and waiting for the chunk's earlier operations: %w)", err, werr)
			}
			f.unrefChunk(ci, nil)
			return err
		}
		done, *soff = done+m, *soff+m
		if *soff == int(s.Len) {
			*si, *soff = *si+1, 0
		}
	}
	return nil
}

// getChunk is one chunk of a typed Get whose reads are in flight: the
// chunk's bytes, the stream bytes from pos they receive, and its index.
type getChunk struct {
	b   []byte
	pos int
	idx int
}

// finishGet waits for every read of chunk g (the reads into one chunk
// complete in no set order; later chunks' reads stay in flight), unpacks
// it and gives up the transfer's reference to it; for an unpack that
// completes later it returns the unpack's wait instead, and the caller
// gives up the reference once that has returned.
func (f *fabPath) finishGet(ctx context.Context, g *getChunk, unpack chunkUnpack) (wait func() error, err error) {
	err = f.waitChunk(ctx, g.idx)
	if err == nil {
		wait, err = unpack(g.b, g.pos)
	}
	if wait == nil {
		f.unrefChunk(g.idx, nil)
	}
	return wait, err
}

// abandon returns err after giving up the transfer's reference to the
// chunk of g (a Get chunk in flight, or none: idx < 0): the chunk is free
// again when the last of its reads completes.
func (f *fabPath) abandon(g *getChunk, err error) error {
	if g.idx >= 0 {
		f.unrefChunk(g.idx, nil)
	}
	return err
}

// spanOf returns the bytes from the start of lo to the end of hi (hi
// at or after lo in one buffer).
func spanOf(lo, hi []byte) []byte {
	d := uintptr(unsafe.Pointer(unsafe.SliceData(hi))) - uintptr(unsafe.Pointer(unsafe.SliceData(lo)))
	return unsafe.Slice(unsafe.SliceData(lo), int(d)+len(hi))
}
