package collectives

import (
	"context"
	"fmt"
	"math"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/checked"
)

// The typed v-collectives, reduce-scatters and scans: counts and
// displacements in elements of the given *ddt.Type (rank r's block of a
// whole starts displs[r]·extent bytes into the buffer), as MPI's. Each
// rank packs its data once (a contiguous layout moves in place) and the
// untyped forms' data movement runs on the packed bytes, hierarchy
// included (hierv.go); receivers unpack once.

// typedBlocks checks the blocks of a v-collective's whole: p counts and
// element displacements of t over buf, every block inside buf and, where
// received (disjoint), no two blocks sharing an element index. It
// returns each block's layout (wblock) and its byte offset.
func typedBlocks(what string, buf []byte, counts, displs []int, t *ddt.Type, p int, disjoint bool) ([]wblock, []int, error) {
	if t == nil {
		return nil, nil, fmt.Errorf("%s: nil datatype: %w", what, ErrInvalid)
	}
	if len(counts) != p || len(displs) != p {
		return nil, nil, fmt.Errorf("%s: %d counts and %d displacements for %d ranks: %w", what, len(counts), len(displs), p, ErrInvalid)
	}
	end := 0
	for i := range counts {
		if counts[i] < 0 || displs[i] < 0 || displs[i] > math.MaxInt-counts[i] {
			return nil, nil, fmt.Errorf("%s: block %d (%d elements at %d): %w", what, i, counts[i], displs[i], ErrInvalid)
		}
		end = max(end, displs[i]+counts[i])
	}
	if disjoint {
		if err := vlayout(what, counts, displs, p, end, true); err != nil {
			return nil, nil, err
		}
	}
	bs, offs := make([]wblock, p), make([]int, p)
	for i := range counts {
		if counts[i] == 0 {
			continue
		}
		off, ok := checked.Mul(int64(displs[i]), t.Extent())
		if !ok || off < 0 || off > int64(len(buf)) {
			return nil, nil, fmt.Errorf("%s: block %d starts at element %d of %s (byte %d) outside a %d-byte buffer: %w",
				what, i, displs[i], t.Name(), off, len(buf), ddt.ErrBounds)
		}
		contig, packed, n, err := typedLayout(buf[off:], counts[i], t)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: block %d: %w", what, i, err)
		}
		bs[i], offs[i] = wblock{contig, packed, n}, int(off)
	}
	return bs, offs, nil
}

// typedWhole is the whole of a typed v-collective at a rank that holds
// it: its blocks, and where the algorithm moves each (the block itself
// when contiguous, else a part of scratch).
type typedWhole struct {
	buf    []byte
	t      *ddt.Type
	counts []int
	bs     []wblock
	offs   []int
	moved  [][]byte
}

// packedNeed is the scratch the packed blocks take.
func (w *typedWhole) packedNeed() int {
	n := 0
	for _, b := range w.bs {
		if b.packed {
			n += b.n
		}
	}
	return n
}

// place assigns the packed blocks their part of scratch (packedNeed
// bytes), packing block r into it where fill(r).
func (w *typedWhole) place(scratch []byte, fill func(r int) bool) error {
	w.moved = make([][]byte, len(w.bs))
	at := 0
	for r, b := range w.bs {
		if !b.packed {
			w.moved[r] = b.contig
			continue
		}
		w.moved[r] = scratch[at : at+b.n : at+b.n]
		at += b.n
		if fill(r) {
			if _, err := w.t.Pack(w.moved[r], w.buf[w.offs[r]:], w.counts[r]); err != nil {
				return fmt.Errorf("pack block %d (%d of %s): %w", r, w.counts[r], w.t.Name(), err)
			}
		}
	}
	return nil
}

// unpack writes the packed blocks back into the layout, but block skip.
func (w *typedWhole) unpack(skip int) error {
	for r, b := range w.bs {
		if b.packed && r != skip {
			if _, err := w.t.Unpack(w.buf[w.offs[r]:], w.moved[r], w.counts[r]); err != nil {
				return fmt.Errorf("unpack block %d (%d of %s): %w", r, w.counts[r], w.t.Name(), err)
			}
		}
	}
	return nil
}

func (w *typedWhole) block(r int) []byte { return w.moved[r] }

func newTypedWhole(what string, buf []byte, counts, displs []int, t *ddt.Type, p int, disjoint bool) (*typedWhole, error) {
	bs, offs, err := typedBlocks(what, buf, counts, displs, t, p, disjoint)
	if err != nil {
		return nil, err
	}
	return &typedWhole{buf: buf, t: t, counts: counts, bs: bs, offs: offs}, nil
}

// GathervTyped collects scount elements of stype from every rank's send
// into root's recv as rcounts[r] elements of rtype starting at element
// displs[r] (displs[r]·extent bytes into recv) for rank r: what rank r
// sends must pack to the size of rcounts[r] elements of rtype (MPI's
// type signature rule, checked on sizes). recv, rcounts, displs and rtype
// are used at the root only, and its blocks must not share elements. In
// place: the root passes send == nil, its part already in recv. As
// Gatherv (linear; through the process level of the hierarchy where a
// process holds several ranks), on packed bytes.
func GathervTyped(ctx context.Context, c *Coll, send []byte, scount int, stype *ddt.Type,
	recv []byte, rcounts, displs []int, rtype *ddt.Type, root int) error {
	if err := c.enter(callGathervTyped); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return c.fail(err)
	}
	isRoot := c.rank == root
	inPlace := isRoot && send == nil
	var sl layout
	var err error
	if !inPlace {
		if sl, err = newLayout("send", send, scount, stype); err != nil {
			return c.fail(err)
		}
	}
	var w *typedWhole
	if isRoot {
		if w, err = newTypedWhole("gathervtyped recv", recv, rcounts, displs, rtype, c.size, true); err != nil {
			return c.fail(err)
		}
		if !inPlace && sl.n != w.bs[root].n {
			return c.fail(sizeMismatch("the root's own send", sl.n, w.bs[root].n))
		}
		if !inPlace && overlap(send, recv) {
			return c.fail(errAlias)
		}
	}
	wn, sn := 0, 0
	if isRoot {
		wn = w.packedNeed()
	}
	if sl.packed {
		sn = sl.n
	}
	scratch := c.buf(typedSlot, wn+sn)
	v := &vcall{s: callSig{call: callGathervTyped, root: root, count: -1, esize: 1}, root: root}
	if isRoot {
		if err := w.place(scratch[:wn], func(r int) bool { return inPlace && r == root }); err != nil { // in place: the root's own block
			return c.fail(err)
		}
		v.block = w.block
		skip := -1
		if inPlace {
			skip = root
		}
		v.after = func() error { return w.unpack(skip) }
	}
	if inPlace {
		v.mine = w.moved[root]
	} else if v.mine, err = sl.moved(scratch[wn:], true); err != nil {
		return c.fail(err)
	}
	return c.runGatherv(ctx, v)
}

// ScattervTyped sends scounts[r] elements of stype starting at element
// displs[r] of root's send to rank r, which unpacks them as rcount
// elements of rtype into its recv; the two must pack to the same size.
// send, scounts, displs and stype are used at the root only. In place:
// the root passes recv == nil, its part staying in send. As Scatterv, on
// packed bytes.
func ScattervTyped(ctx context.Context, c *Coll, send []byte, scounts, displs []int, stype *ddt.Type,
	recv []byte, rcount int, rtype *ddt.Type, root int) error {
	if err := c.enter(callScattervTyped); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return c.fail(err)
	}
	isRoot := c.rank == root
	inPlace := isRoot && recv == nil
	var rl layout
	var err error
	if !inPlace {
		if rl, err = newLayout("recv", recv, rcount, rtype); err != nil {
			return c.fail(err)
		}
	}
	var w *typedWhole
	if isRoot {
		if w, err = newTypedWhole("scattervtyped send", send, scounts, displs, stype, c.size, false); err != nil {
			return c.fail(err)
		}
		if !inPlace && rl.n != w.bs[root].n {
			return c.fail(sizeMismatch("the root's own block", w.bs[root].n, rl.n))
		}
		if !inPlace && overlap(send, recv) {
			return c.fail(errAlias)
		}
	}
	wn, rn := 0, 0
	if isRoot {
		wn = w.packedNeed()
	}
	if rl.packed {
		rn = rl.n
	}
	scratch := c.buf(typedSlot, wn+rn)
	v := &vcall{s: callSig{call: callScattervTyped, root: root, count: -1, esize: 1}, root: root}
	if isRoot {
		if err := w.place(scratch[:wn], func(int) bool { return true }); err != nil {
			return c.fail(err)
		}
		v.block = w.block
	}
	if inPlace {
		v.mine = w.moved[root]
	} else {
		v.mine, _ = rl.moved(scratch[wn:], false)
		if rl.packed {
			v.after = func() error { return rl.unpack(v.mine, 0, rcount) }
		}
	}
	return c.runScatterv(ctx, v)
}

// AllgathervTyped collects scount elements of stype from every rank's
// send into every rank's recv as rcounts[r] elements of rtype starting
// at element displs[r] for rank r (rcounts the same on every rank; the
// blocks must not share elements). What rank r sends must pack to the
// size of rcounts[r] elements of rtype. In place: send == nil, each
// rank's own part already in recv. As Allgatherv, on packed bytes.
func AllgathervTyped(ctx context.Context, c *Coll, send []byte, scount int, stype *ddt.Type,
	recv []byte, rcounts, displs []int, rtype *ddt.Type) error {
	if err := c.enter(callAllgathervTyped); err != nil {
		return err
	}
	me := c.rank
	w, err := newTypedWhole("allgathervtyped recv", recv, rcounts, displs, rtype, c.size, true)
	if err != nil {
		return c.fail(err)
	}
	var sl layout
	if send != nil {
		if sl, err = newLayout("send", send, scount, stype); err != nil {
			return c.fail(err)
		}
		if sl.n != w.bs[me].n {
			return c.fail(sizeMismatch("send", sl.n, w.bs[me].n))
		}
		if overlap(send, recv) {
			return c.fail(errAlias)
		}
	}
	wn, sn := w.packedNeed(), 0
	if sl.packed {
		sn = sl.n
	}
	scratch := c.buf(typedSlot, wn+sn)
	// in place: this rank's own block packed from recv
	if err := w.place(scratch[:wn], func(r int) bool { return send == nil && r == me }); err != nil {
		return c.fail(err)
	}
	skip := -1
	var mine []byte
	if send == nil {
		mine, skip = w.moved[me], me
	} else if mine, err = sl.moved(scratch[wn:], true); err != nil {
		return c.fail(err)
	}
	total := 0
	for _, b := range w.bs {
		total += b.n
	}
	v := &vcall{s: callSig{call: callAllgathervTyped, root: -1, count: -1, esize: 1}, mine: mine, block: w.block, root: -1,
		after: func() error { return w.unpack(skip) }}
	return c.runAllgatherv(ctx, v, total)
}

// AlltoallvTyped sends scounts[j] elements of stype starting at element
// sdispls[j] of send to rank j, which unpacks what rank i sent as
// rcounts[i] elements of rtype starting at element rdispls[i] of its
// recv: Alltoallw with one type per side and displacements in elements.
// What i sends j must pack to the size of what j expects from i; receive
// blocks must not share elements. In place: send == nil (scounts,
// sdispls and stype nil too), what is sent taken from recv. Algorithms
// as Alltoallw's.
func AlltoallvTyped(ctx context.Context, c *Coll, send []byte, scounts, sdispls []int, stype *ddt.Type,
	recv []byte, rcounts, rdispls []int, rtype *ddt.Type) error {
	if err := c.enter(callAlltoallvTyped); err != nil {
		return err
	}
	p := c.size
	rd, err := byteDispls("recv", rcounts, rdispls, rtype, p, true)
	if err != nil {
		return c.fail(err)
	}
	var sd []int
	var sts []*ddt.Type
	if send != nil {
		if sd, err = byteDispls("send", scounts, sdispls, stype, p, false); err != nil {
			return c.fail(err)
		}
		sts = repeat(stype, p)
	}
	return alltoallw(ctx, c, send, scounts, sd, sts, recv, rcounts, rd, repeat(rtype, p))
}

// byteDispls converts element displacements of t into bytes, after
// checking counts and displacements as typedBlocks does.
func byteDispls(what string, counts, displs []int, t *ddt.Type, p int, disjoint bool) ([]int, error) {
	what = "alltoallvtyped " + what
	if t == nil {
		return nil, fmt.Errorf("%s: nil datatype: %w", what, ErrInvalid)
	}
	if len(counts) != p || len(displs) != p {
		return nil, fmt.Errorf("%s: %d counts and %d displacements for %d ranks: %w", what, len(counts), len(displs), p, ErrInvalid)
	}
	end := 0
	out := make([]int, p)
	for i := range counts {
		if counts[i] < 0 || displs[i] < 0 || displs[i] > math.MaxInt-counts[i] {
			return nil, fmt.Errorf("%s: block %d (%d elements at %d): %w", what, i, counts[i], displs[i], ErrInvalid)
		}
		end = max(end, displs[i]+counts[i])
		off, ok := checked.Mul(int64(displs[i]), t.Extent())
		if !ok || off < 0 {
			return nil, fmt.Errorf("%s: block %d at element %d of %s: %w", what, i, displs[i], t.Name(), ddt.ErrBounds)
		}
		out[i] = int(off)
	}
	if disjoint {
		if err := vlayout(what, counts, displs, p, end, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func repeat(t *ddt.Type, p int) []*ddt.Type {
	ts := make([]*ddt.Type, p)
	for i := range ts {
		ts[i] = t
	}
	return ts
}
