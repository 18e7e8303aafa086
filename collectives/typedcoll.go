package collectives

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sync"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/memcopy"
)

// The typed forms of the data movers and reductions: every buffer is a
// count of a *ddt.Type laid out from the buffer's first byte
// (displacement 0, as in endpoint.Comm.SendTyped). The algorithms move
// packed bytes: a layout that is one contiguous run of bytes is moved in
// place, any other is packed once (by ddt, with package jit's compiled
// kernels) straight into the buffer the algorithm sends from, and
// unpacked once from the buffer it receives into. The types may differ
// between ranks and between send and receive as long as their packed data
// agree in size (MPI's type signature rule, checked on sizes): a column
// gathered into rows, say.

// layout is count elements of a datatype over a user buffer, as the
// algorithms see it.
type layout struct {
	buf    []byte
	t      *ddt.Type
	count  int
	contig []byte // the elements' bytes, where they are one contiguous run
	packed bool   // not contiguous: pack and unpack
	n      int    // packed bytes of the count elements
}

func newLayout(what string, buf []byte, count int, t *ddt.Type) (layout, error) {
	contig, packed, n, err := typedLayout(buf, count, t)
	if err != nil {
		return layout{}, fmt.Errorf("%s: %w", what, err)
	}
	return layout{buf: buf, t: t, count: count, contig: contig, packed: packed, n: n}, nil
}

// span is the packed bytes of elements [first, first+k) when the layout
// is contiguous (its packed stream is then its bytes).
func (l *layout) span(first, k int) []byte {
	sz := int(l.t.Size())
	return l.contig[first*sz : (first+k)*sz]
}

// pack writes elements [first, first+k) of the layout, packed, into dst
// (their packed size).
func (l *layout) pack(dst []byte, first, k int) error {
	if len(dst) == 0 {
		return nil
	}
	if !l.packed {
		memcopy.Copy(dst, l.span(first, k))
		return nil
	}
	m, err := l.t.PackRange(dst, l.buf, int64(first)*l.t.Extent(), k, 0)
	if err == nil && m != len(dst) {
		err = fmt.Errorf("packed %d bytes of %d: %w", m, len(dst), ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("pack %d elements of %s: %w", k, l.t.Name(), err)
	}
	return nil
}

// unpack is the reverse of pack: src into elements [first, first+k).
func (l *layout) unpack(src []byte, first, k int) error {
	if len(src) == 0 {
		return nil
	}
	if !l.packed {
		memcopy.Copy(l.span(first, k), src)
		return nil
	}
	if _, err := l.t.UnpackRange(l.buf, src, int64(first)*l.t.Extent(), k, 0); err != nil {
		return fmt.Errorf("unpack %d elements of %s: %w", k, l.t.Name(), err)
	}
	return nil
}

// moved returns the bytes the algorithm moves for the whole layout: its
// own when contiguous, else the scratch at (packed into it when fill).
func (l *layout) moved(at []byte, fill bool) ([]byte, error) {
	if !l.packed {
		return l.contig, nil
	}
	if fill {
		if err := l.pack(at, 0, l.count); err != nil {
			return nil, err
		}
	}
	return at, nil
}

// sizeMismatch is the error of a block whose packed size differs from
// the one expected.
func sizeMismatch(what string, got, want int) error {
	return fmt.Errorf("%s packs to %d bytes, the receive layout to %d (the type signatures differ): %w", what, got, want, ErrInvalid)
}

// GatherTyped collects scount elements of stype from every rank's send,
// in rank order, into root's recv as Size()·rcount elements of rtype:
// rank i's data fills elements i·rcount .. (i+1)·rcount-1 (element k of
// a layout starts k·extent bytes into recv). What every rank sends must
// pack to the size of rcount elements of rtype; recv, rcount and rtype
// are used at the root only. In place: the root passes send == nil, its
// own part already in recv. Algorithms as Gather's, chosen by the packed
// block size.
func GatherTyped(ctx context.Context, c *Coll, send []byte, scount int, stype *ddt.Type,
	recv []byte, rcount int, rtype *ddt.Type, root int) error {
	if err := c.enter(callGatherTyped); err != nil {
		return err
	}
	r, err := rootedTyped(ctx, c, callGatherTyped, CollGather, recv, rcount, rtype, send, scount, stype, root, true)
	if err != nil {
		return c.typedFail(err)
	}
	if r.alg == algHier {
		return c.typedAfter(hierGatherTo(ctx, c, r.mine, r.all, root), func() error {
			if c.rank == root && r.whole.packed {
				return r.whole.unpack(r.all, 0, r.whole.count)
			}
			return nil
		})
	}
	if r.alg == Linear {
		err = c.gatherLinear(ctx, r.mine, r.all, root)
	} else {
		err = c.gatherBinomial(ctx, r.mine, r.all, root)
	}
	if err == nil && c.rank == root && r.whole.packed {
		err = r.whole.unpack(r.all, 0, r.whole.count)
	}
	return c.done(err)
}

// ScatterTyped sends elements i·scount .. (i+1)·scount-1 of stype in
// root's send to rank i, which unpacks them as rcount elements of rtype
// into its recv. Each rank's receive layout must pack to the size of
// scount elements of stype; send, scount and stype are used at the root
// only. In place: the root passes recv == nil, its part staying in send.
// Algorithms as Scatter's, chosen by the packed block size.
func ScatterTyped(ctx context.Context, c *Coll, send []byte, scount int, stype *ddt.Type,
	recv []byte, rcount int, rtype *ddt.Type, root int) error {
	if err := c.enter(callScatterTyped); err != nil {
		return err
	}
	r, err := rootedTyped(ctx, c, callScatterTyped, CollScatter, send, scount, stype, recv, rcount, rtype, root, false)
	if err != nil {
		return c.typedFail(err)
	}
	if r.alg == algHier {
		return c.typedAfter(hierScatterFrom(ctx, c, r.all, r.mine, root), func() error {
			if !r.inPlace && r.part.packed {
				return r.part.unpack(r.mine, 0, r.part.count)
			}
			return nil
		})
	}
	if r.alg == Linear {
		err = c.scatterLinear(ctx, r.all, r.mine, root)
	} else {
		err = c.scatterBinomial(ctx, r.all, r.mine, root)
	}
	if err == nil && !r.inPlace && r.part.packed {
		err = r.part.unpack(r.mine, 0, r.part.count)
	}
	return c.done(err)
}

// rooted is a rooted typed collective ready to run: the root's whole
// (Size() blocks) and this rank's part, and the bytes the algorithm moves
// for each (the layout's own where contiguous, else the typed scratch).
type rootedT struct {
	whole   layout // at the root
	all     []byte // at the root: the whole's bytes as the algorithm moves them
	part    layout // unless in place
	inPlace bool   // the root's part is its block of the whole
	mine    []byte // the part's bytes as the algorithm moves them
	alg     Algorithm
}

// rootedTyped prepares GatherTyped (gather: the whole is received) or
// ScatterTyped: root check, the layouts (the whole at the root only, the
// part everywhere except the root in place), the agreement of the packed
// block sizes at the root, and the agreement on the call, whose count is
// the packed block size every rank must have. Then it packs what is sent:
// the part of a gather (at the root straight into its block of the
// whole), the whole of a scatter.
func rootedTyped(ctx context.Context, c *Coll, call callID, k Collective, wbuf []byte, wcount int, wtype *ddt.Type,
	pbuf []byte, pcount int, ptype *ddt.Type, root int, gather bool) (r rootedT, err error) {
	if err := c.checkRoot(root); err != nil {
		return r, err
	}
	wname, pname := "recv", "send"
	if !gather {
		wname, pname = "send", "recv"
	}
	isRoot := c.rank == root
	r.inPlace = isRoot && pbuf == nil
	if !r.inPlace {
		if r.part, err = newLayout(pname, pbuf, pcount, ptype); err != nil {
			return r, err
		}
	}
	nb := r.part.n
	if isRoot {
		if r.whole, err = wholeLayout(wname, wbuf, c.size, wcount, wtype); err != nil {
			return r, err
		}
		if wn := r.whole.n / c.size; r.inPlace {
			nb = wn
		} else if nb != wn {
			return r, sizeMismatch("the root's own "+pname, nb, wn)
		} else if overlap(pbuf, wbuf) {
			return r, errAlias
		}
	}
	r.alg = c.cfg.pick(k, nb, c.size)
	ready := c.ready
	if c.hierFits(k, nb) {
		r.alg, ready = algHier, c.hierReady
	}
	if err := ready(ctx, callSig{call: call, root: root, count: nb, esize: 1, alg: r.alg}); err != nil {
		return r, err
	}
	// scratch: the packed whole, then the packed part (at a gather's root
	// the part is its block of the whole)
	wn, pn := 0, 0
	if isRoot && r.whole.packed {
		wn = r.whole.n
	}
	ownBlock := r.inPlace || (gather && isRoot)
	if !ownBlock && r.part.packed {
		pn = r.part.n
	}
	scratch := c.buf(typedSlot, wn+pn)
	if isRoot {
		if r.all, err = r.whole.moved(scratch[:wn], !gather); err != nil {
			return r, err
		}
	}
	if ownBlock {
		r.mine = r.all[root*nb : (root+1)*nb]
	} else {
		r.mine, _ = r.part.moved(scratch[wn:], false)
	}
	if !gather {
		return r, nil
	}
	switch {
	case r.inPlace && r.whole.packed:
		err = r.whole.pack(r.mine, root*wcount, wcount)
	case !r.inPlace && (isRoot || r.part.packed):
		err = r.part.pack(r.mine, 0, pcount)
	}
	return r, err
}

// wholeLayout is the layout of p blocks of count elements of t in buf.
func wholeLayout(what string, buf []byte, p, count int, t *ddt.Type) (layout, error) {
	if count < 0 || count > math.MaxInt/p {
		return layout{}, fmt.Errorf("%s: count %d for %d ranks: %w", what, count, p, ErrInvalid)
	}
	return newLayout(what, buf, p*count, t)
}

// AllgatherTyped collects scount elements of stype from every rank's
// send, in rank order, into every rank's recv as Size()·rcount elements
// of rtype (rank i's data in elements i·rcount .. (i+1)·rcount-1). What
// each rank sends must pack to the size of rcount elements of rtype. In
// place: send == nil, each rank's own part already in recv. Algorithms
// as Allgather's, chosen by the packed size of the result.
func AllgatherTyped(ctx context.Context, c *Coll, send []byte, scount int, stype *ddt.Type,
	recv []byte, rcount int, rtype *ddt.Type) error {
	if err := c.enter(callAllgatherTyped); err != nil {
		return err
	}
	p, me := c.size, c.rank
	rl, err := wholeLayout("recv", recv, p, rcount, rtype)
	if err != nil {
		return c.fail(err)
	}
	nb := rl.n / p
	var sl layout
	if send != nil {
		if sl, err = newLayout("send", send, scount, stype); err != nil {
			return c.fail(err)
		}
		if sl.n != nb {
			return c.fail(sizeMismatch("send", sl.n, nb))
		}
		if overlap(send, recv) {
			return c.fail(errAlias)
		}
	}
	hier := c.hierFits(CollAllgather, p*nb)
	alg := c.cfg.pick(CollAllgather, p*nb, p)
	if !hier {
		if err := c.ready(ctx, callSig{call: callAllgatherTyped, root: -1, count: nb, esize: 1, alg: alg}); err != nil {
			return c.fail(err)
		}
	}
	all, _ := rl.moved(c.buf(typedSlot, rl.n), false)
	mine := all[me*nb : (me+1)*nb]
	switch {
	case send != nil:
		err = sl.pack(mine, 0, scount)
	case rl.packed:
		err = rl.pack(mine, me*rcount, rcount)
	}
	if err != nil {
		return c.fail(err)
	}
	if hier { // each rank's packed block, shared through the hierarchy
		return c.typedAfter(hierAllgather(ctx, c, nil, all, callSig{call: callAllgatherTyped, root: -1, count: nb, esize: 1}), func() error {
			if rl.packed {
				return rl.unpack(all, 0, rl.count)
			}
			return nil
		})
	}
	if err := c.allgather(ctx, all, nb, alg, nil); err != nil {
		return c.fail(err)
	}
	if rl.packed {
		if err := rl.unpack(all, 0, rl.count); err != nil {
			return c.fail(err)
		}
	}
	return c.done(nil)
}

// AlltoallTyped sends elements j·scount .. (j+1)·scount-1 of stype in
// every rank's send to rank j, which unpacks what rank i sent into
// elements i·rcount .. (i+1)·rcount-1 of rtype in its recv. scount
// elements of stype must pack to the size of rcount elements of rtype.
// In place: send == nil, what is sent taken from recv (packed first).
// Algorithms as Alltoall's, chosen by the packed block size.
func AlltoallTyped(ctx context.Context, c *Coll, send []byte, scount int, stype *ddt.Type,
	recv []byte, rcount int, rtype *ddt.Type) error {
	if err := c.enter(callAlltoallTyped); err != nil {
		return err
	}
	p := c.size
	rl, err := wholeLayout("recv", recv, p, rcount, rtype)
	if err != nil {
		return c.fail(err)
	}
	nb := rl.n / p
	sl := rl
	if send != nil {
		if sl, err = wholeLayout("send", send, p, scount, stype); err != nil {
			return c.fail(err)
		}
		if sl.n != rl.n {
			return c.fail(sizeMismatch("send", sl.n/p, nb))
		}
		if overlap(send, recv) {
			return c.fail(errAlias)
		}
	}
	hier := c.hierFor(CollAlltoall, 0) // every rank in this process
	alg := c.alltoallAlg(nb, p)
	if !hier {
		if err := c.ready(ctx, callSig{call: callAlltoallTyped, root: -1, count: nb, esize: 1, alg: alltoallSig(alg)}); err != nil {
			return c.fail(err)
		}
	}
	sn, rn := 0, 0 // scratch: the packed send blocks, then the packed receive blocks
	if send == nil || sl.packed {
		sn = rl.n
	}
	if rl.packed {
		rn = rl.n
	}
	scratch := c.buf(typedSlot, sn+rn)
	var sall []byte
	if send == nil { // the receives overwrite what is sent: a copy first
		sall = scratch[:sn]
		err = rl.pack(sall, 0, rl.count)
	} else {
		sall, err = sl.moved(scratch[:sn], true)
	}
	if err != nil {
		return c.fail(err)
	}
	rall, _ := rl.moved(scratch[sn:], false)
	if hier { // the leader copies the packed blocks
		return c.typedAfter(hierAlltoall(ctx, c, sall, rall, callSig{call: callAlltoallTyped, root: -1, count: nb, esize: 1}), func() error {
			if rl.packed {
				return rl.unpack(rall, 0, rl.count)
			}
			return nil
		})
	}
	if err := c.alltoall(ctx, func(j int) []byte { return sall[j*nb : (j+1)*nb] },
		func(i int) []byte { return rall[i*nb : (i+1)*nb] }, alg); err != nil {
		return c.fail(err)
	}
	if rl.packed {
		if err := rl.unpack(rall, 0, rl.count); err != nil {
			return c.fail(err)
		}
	}
	return c.done(nil)
}

// ReduceTyped is Reduce over count elements of datatype t in send and,
// at the root, recv (t's displacements are bytes from the first element
// of the slice): a column of a row-major matrix, say, reduced into the
// root's column. As MPI requires, t must be built of T alone: its packed
// data a sequence of T values (a ddt.Vector of ddt.Float64 for a
// []float64, of ddt.Of[T]() for a struct T without padding); any other
// type is refused with ErrInvalid. The packed vectors are reduced as
// Reduce does (same algorithms, chosen by the packed size). In place:
// the root passes send == nil, its contribution in recv's layout.
func ReduceTyped[T any](ctx context.Context, c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T], root int) error {
	if err := c.enter(callReduceTyped); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return c.fail(err)
	}
	es, m, err := reductionType[T](t, count, &op)
	if err != nil {
		return c.fail(err)
	}
	inPlace := c.rank == root && send == nil
	var sl, rl layout
	if !inPlace {
		if sl, err = newLayout("send", bytesOf(send), count, t); err != nil {
			return c.fail(err)
		}
	}
	if c.rank == root {
		if rl, err = newLayout("recv", bytesOf(recv), count, t); err != nil {
			return c.fail(err)
		}
		if !inPlace && overlap(bytesOf(send), bytesOf(recv)) {
			return c.fail(errAlias)
		}
	}
	hier := c.hierFor(CollReduce, c.orderedBytes(op.commutative, m*es))
	alg := c.cfg.pick(CollReduce, m*es, c.size)
	if !hier {
		if err := c.ready(ctx, callSig{call: callReduceTyped, root: root, count: m, esize: es, op: op.code, alg: alg}); err != nil {
			return c.fail(err)
		}
	}
	// scratch: the packed contribution, then the packed result (root)
	sn, rn := 0, 0
	if !inPlace && !aligned[T](&sl) {
		sn = m * es
	}
	if c.rank == root && !aligned[T](&rl) {
		rn = m * es
	}
	scratch := c.buf(typedSlot, sn+rn)
	var src, res []T
	if c.rank == root {
		if res, err = vectorOf[T](&rl, scratch[sn:], inPlace); err != nil {
			return c.fail(err)
		}
	}
	if inPlace {
		src = res
	} else if src, err = vectorOf[T](&sl, scratch[:sn], true); err != nil {
		return c.fail(err)
	}
	unpack := func() error {
		if c.rank == root && !aligned[T](&rl) {
			return rl.unpack(bytesOf(res), 0, count)
		}
		return nil
	}
	if hier { // the packed vectors, reduced through the hierarchy
		err := hierReduce(ctx, c, src, res, &op, root, callSig{call: callReduceTyped, root: root, count: m, esize: es, op: op.code})
		return c.typedAfter(err, unpack)
	}
	if err := reduceTo(ctx, c, src, res, &op, root, alg); err != nil {
		return c.fail(err)
	}
	if err := unpack(); err != nil {
		return c.fail(err)
	}
	return c.done(nil)
}

// AllreduceTyped is Allreduce over count elements of datatype t in send
// and recv (as ReduceTyped: t built of T alone, else ErrInvalid), the
// result in every rank's recv layout. The packed vector is reduced as
// Allreduce does: send is packed straight into the buffer the algorithm
// reduces in (recv itself where its layout is contiguous). In place:
// send == nil, each rank's contribution in recv.
func AllreduceTyped[T any](ctx context.Context, c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T]) error {
	if err := c.enter(callAllreduceTyped); err != nil {
		return err
	}
	es, m, err := reductionType[T](t, count, &op)
	if err != nil {
		return c.fail(err)
	}
	var sl layout
	rl, err := newLayout("recv", bytesOf(recv), count, t)
	if err != nil {
		return c.fail(err)
	}
	if send != nil {
		if sl, err = newLayout("send", bytesOf(send), count, t); err != nil {
			return c.fail(err)
		}
		if overlap(bytesOf(send), bytesOf(recv)) {
			return c.fail(errAlias)
		}
	}
	hier := c.hierFor(CollAllreduce, c.orderedBytes(op.commutative, m*es))
	alg := c.cfg.pick(CollAllreduce, m*es, c.size)
	if !hier {
		if err := c.ready(ctx, callSig{call: callAllreduceTyped, root: -1, count: m, esize: es, op: op.code, alg: alg}); err != nil {
			return c.fail(err)
		}
	}
	var scratch []byte
	if !aligned[T](&rl) {
		scratch = c.buf(typedSlot, m*es)
	}
	acc, err := vectorOf[T](&rl, scratch, send == nil)
	if err == nil && send != nil {
		err = sl.pack(bytesOf(acc), 0, count)
	}
	if err != nil {
		return c.fail(err)
	}
	if hier { // the packed vectors, reduced through the hierarchy
		err := hierAllreduce(ctx, c, nil, acc, &op, callSig{call: callAllreduceTyped, root: -1, count: m, esize: es, op: op.code})
		return c.typedAfter(err, func() error {
			if !aligned[T](&rl) {
				return rl.unpack(bytesOf(acc), 0, count)
			}
			return nil
		})
	}
	if err := allreduce(ctx, c, acc, &op, alg); err != nil {
		return c.fail(err)
	}
	if !aligned[T](&rl) {
		if err := rl.unpack(bytesOf(acc), 0, count); err != nil {
			return c.fail(err)
		}
	}
	return c.done(nil)
}

// aligned reports whether a layout's packed data can be reduced where it
// lies: contiguous and aligned for T.
func aligned[T any](l *layout) bool {
	if l.packed {
		return false
	}
	var z T
	return len(l.contig) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(l.contig)))%unsafe.Alignof(z) == 0
}

// vectorOf returns the layout's data as a []T to reduce in: its own bytes
// where aligned, else scratch (packed into it when fill).
func vectorOf[T any](l *layout, scratch []byte, fill bool) ([]T, error) {
	if aligned[T](l) {
		return elems[T](l.contig), nil
	}
	if fill {
		if err := l.pack(scratch, 0, l.count); err != nil {
			return nil, err
		}
	}
	return elems[T](scratch), nil
}

// elemTypes caches ddt.Of per element type of a typed reduction.
var elemTypes sync.Map // reflect.Type → *ddt.Type

// reductionType checks a typed reduction's operation and datatype: count
// elements of t must carry a whole number of T values and nothing else
// (t's type signature that of so many T, or untyped bytes for a one-byte
// T). It returns T's size and the number of T values.
func reductionType[T any](t *ddt.Type, count int, op *Op[T]) (es, m int, err error) {
	if es, err = elemSize[T](); err != nil {
		return 0, 0, err
	}
	if err := op.valid(); err != nil {
		return 0, 0, err
	}
	if t == nil {
		return 0, 0, fmt.Errorf("nil datatype: %w", ErrInvalid)
	}
	if count < 0 {
		return 0, 0, fmt.Errorf("count %d: %w", count, ErrInvalid)
	}
	size, err := t.PackSize(count)
	if err != nil {
		return 0, 0, err
	}
	rt := reflect.TypeFor[T]()
	v, ok := elemTypes.Load(rt)
	if !ok {
		et, err := ddt.OfType(rt)
		if err != nil {
			return 0, 0, fmt.Errorf("element type %v: %w", rt, err)
		}
		v, _ = elemTypes.LoadOrStore(rt, et)
	}
	et := v.(*ddt.Type)
	if et.Size() != int64(es) {
		return 0, 0, fmt.Errorf("element type %v has padding (%d data bytes in %d): %w", rt, et.Size(), es, ErrInvalid)
	}
	if size%int64(es) != 0 {
		return 0, 0, fmt.Errorf("%d elements of %s hold %d bytes, not a whole number of %v: %w", count, t.Name(), size, rt, ErrInvalid)
	}
	m = int(size / int64(es))
	if m == 0 {
		return es, 0, nil
	}
	have, err := t.Signature(count, size)
	if err != nil {
		return 0, 0, err
	}
	want, err := et.Signature(m, size)
	if err != nil {
		return 0, 0, err
	}
	if have != want && !(have == 0 && es == 1) {
		return 0, 0, fmt.Errorf("%d elements of %s are not %d values of %v (a reduction's datatype must be built of its element type alone): %w",
			count, t.Name(), m, rt, ErrInvalid)
	}
	return es, m, nil
}
