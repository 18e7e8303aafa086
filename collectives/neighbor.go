package collectives

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// The neighbourhood collectives of a Cartesian grid (MPI's
// MPI_Neighbor_allgather, MPI_Neighbor_alltoall and
// MPI_Neighbor_alltoallw over a communicator made by MPI_Cart_create):
// each rank exchanges blocks with its 2·d neighbours only, the halo
// exchange of a stencil code in one call.
//
// The neighbours are, for each dimension i in order, the rank one step
// down (i's source of endpoint.Cart.Shift(i, 1)) and the rank one step up
// (its destination): block 2i goes to and comes from the rank below,
// block 2i+1 the rank above. Where the grid ends (a dimension that does
// not wrap) the neighbour is endpoint.ProcNull: nothing is sent there and
// the receive block is left as it was. A dimension that wraps with an
// extent of 1 or 2 has the same rank below and above (this rank itself at
// extent 1); block 2i still receives what that rank sent up, block 2i+1
// what it sent down.
//
// Between two ranks the messages of one call go in a fixed order — by
// dimension, then the block sent up before the block sent down — and
// each rank posts its receives in the matching order, so that they pair
// up by MPI's non-overtaking rule even when one rank is a neighbour twice.

// Neighbors returns this rank's neighbours in g in the order the
// neighbourhood collectives use (below and above for each dimension;
// endpoint.ProcNull where there is none), 2·len(g.Dims()) of them.
func Neighbors(g *endpoint.Cart) ([]int, error) {
	if g == nil {
		return nil, fmt.Errorf("collectives: Neighbors of a nil grid: %w", ErrInvalid)
	}
	d := len(g.Dims())
	out := make([]int, 0, 2*d)
	for i := range d {
		lo, hi, err := g.Shift(i, 1)
		if err != nil {
			return nil, fmt.Errorf("collectives: Neighbors: %w", err)
		}
		out = append(out, lo, hi)
	}
	return out, nil
}

// neighborSetup checks that c was made over g's communicator and returns
// the neighbours, into c's scratch list.
func (c *Coll) neighborSetup(g *endpoint.Cart) ([]int, error) {
	if g == nil {
		return nil, fmt.Errorf("nil grid: %w", ErrInvalid)
	}
	if g.Comm() != c.parent {
		return nil, fmt.Errorf("the handle was not made over the grid's communicator (collectives.New(ctx, grid.Comm())): %w", ErrInvalid)
	}
	d := len(g.Dims())
	nb := c.nbrs[:0]
	for i := range d {
		lo, hi, err := g.Shift(i, 1)
		if err != nil {
			return nil, err
		}
		nb = append(nb, lo, hi)
	}
	c.nbrs = nb
	return nb, nil
}

// neighborRound posts the receives and sends of one neighbourhood call in
// the order the package comment gives, and waits for them: recv(k, peer)
// and send(k, peer) post block k's.
func (c *Coll) neighborRound(ctx context.Context, nb []int, recv, send func(k, peer int) error) error {
	for i := 0; i < len(nb); i += 2 {
		for _, k := range [2]int{i, i + 1} { // from below (sent up), from above (sent down)
			if nb[k] != endpoint.ProcNull {
				if err := recv(k, nb[k]); err != nil {
					return err
				}
			}
		}
	}
	for i := 0; i < len(nb); i += 2 {
		for _, k := range [2]int{i + 1, i} { // up, then down
			if nb[k] != endpoint.ProcNull {
				if err := send(k, nb[k]); err != nil {
					return err
				}
			}
		}
	}
	return c.wait(ctx)
}

// maxCheckedBlocks bounds the blocks disjoint compares.
const maxCheckedBlocks = 1 << 16

// disjoint checks, for send and recv slices that overlap (a halo
// exchange within one array), that no byte a receive layout writes is
// one a send layout reads or another receive layout writes, block by
// block. Layouts of more than maxCheckedBlocks blocks in all are refused:
// pass separate buffers for them.
func (c *Coll) disjoint(nb []int, send []byte, scounts, sdispls []int, stypes []*ddt.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*ddt.Type) error {
	base := func(b []byte) int64 { return int64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
	collect := func(segs []ddt.Segment, b []byte, counts, displs []int, types []*ddt.Type) ([]ddt.Segment, error) {
		for k, p := range nb {
			if p == endpoint.ProcNull || counts[k] == 0 {
				continue
			}
			left := maxCheckedBlocks - len(segs)
			if left <= 0 || types[k].ExceedsSegments(counts[k], left) {
				return segs, fmt.Errorf("send and recv share memory and their layouts have more than %d blocks to compare (pass separate buffers): %w", maxCheckedBlocks, ErrInvalid)
			}
			from := len(segs)
			var err error
			if segs, err = types[k].AppendSegments(segs, counts[k], left); err != nil {
				return segs, fmt.Errorf("send and recv share memory and their layouts have more than %d blocks to compare (pass separate buffers): %w", maxCheckedBlocks, ErrInvalid)
			}
			at := base(b) + int64(displs[k])
			for i := from; i < len(segs); i++ {
				segs[i].Off += at
			}
		}
		return segs, nil
	}
	r, err := collect(c.segs[:0], recv, rcounts, rdispls, rtypes)
	c.segs = r
	if err != nil {
		return err
	}
	nr := len(r)
	all, err := collect(r, send, scounts, sdispls, stypes)
	c.segs = all
	if err != nil {
		return err
	}
	recvs, sends := all[:nr], all[nr:]
	byOff := func(a, b ddt.Segment) int { return cmp.Compare(a.Off, b.Off) }
	slices.SortFunc(recvs, byOff)
	slices.SortFunc(sends, byOff)
	for i := 1; i < len(recvs); i++ {
		if recvs[i].Off < recvs[i-1].Off+recvs[i-1].Len {
			return fmt.Errorf("two receive layouts write the same bytes: %w", ErrInvalid)
		}
	}
	for i, j := 0, 0; i < len(recvs) && j < len(sends); {
		r, s := recvs[i], sends[j]
		switch {
		case r.Off+r.Len <= s.Off:
			i++
		case s.Off+s.Len <= r.Off:
			j++
		default:
			return fmt.Errorf("a receive layout writes bytes a send layout reads: %w", ErrInvalid)
		}
	}
	return nil
}

// NeighborAllgather sends send to every neighbour of this rank in the
// grid g and receives each neighbour's send into its block of recv
// (MPI_Neighbor_allgather): recv holds 2·d blocks of len(send) elements,
// in the order of Neighbors; a block whose neighbour is ProcNull is left
// as it was. c must have been made over g.Comm(), and every rank must
// pass the same len(send).
func NeighborAllgather[T any](ctx context.Context, c *Coll, g *endpoint.Cart, send, recv []T) error {
	return neighborBlocks(ctx, c, callNeighborAllgather, g, send, recv, false)
}

// NeighborAlltoall sends block k of send to the k-th neighbour of this
// rank in the grid g and receives that neighbour's block for this rank
// into block k of recv (MPI_Neighbor_alltoall): send and recv each hold
// 2·d blocks of the same size, in the order of Neighbors. Blocks for and
// from ProcNull neighbours are neither sent nor written. c must have been
// made over g.Comm(), and every rank must pass the same block size.
func NeighborAlltoall[T any](ctx context.Context, c *Coll, g *endpoint.Cart, send, recv []T) error {
	return neighborBlocks(ctx, c, callNeighborAlltoall, g, send, recv, true)
}

// neighborBlocks is NeighborAlltoall (perPeer: a block of send per
// neighbour) or NeighborAllgather (send whole to each).
func neighborBlocks[T any](ctx context.Context, c *Coll, id callID, g *endpoint.Cart, send, recv []T, perPeer bool) error {
	if err := c.enter(id); err != nil {
		return err
	}
	es, err := elemSize[T]()
	if err != nil {
		return c.fail(err)
	}
	nb, err := c.neighborSetup(g)
	if err != nil {
		return c.fail(err)
	}
	k := len(send) // elements per block
	if perPeer {
		if len(nb) > 0 {
			k = len(send) / len(nb)
		}
		if len(send) != len(recv) || k*len(nb) != len(send) {
			return c.fail(fmt.Errorf("send holds %d elements and recv %d, want both %d equal blocks: %w", len(send), len(recv), len(nb), ErrInvalid))
		}
	} else if len(recv) != len(nb)*k {
		return c.fail(fmt.Errorf("recv holds %d elements, want %d blocks of %d: %w", len(recv), len(nb), k, ErrInvalid))
	}
	sb, rb := bytesOf(send), bytesOf(recv)
	if overlap(sb, rb) {
		return c.fail(fmt.Errorf("send and recv overlap: %w", ErrInvalid))
	}
	if err := c.ready(ctx, callSig{call: id, root: -1, count: k, esize: es}); err != nil {
		return c.fail(err)
	}
	n := k * es
	return c.done(c.neighborRound(ctx, nb,
		func(j, peer int) error { return c.recv(rb[j*n:(j+1)*n], peer) },
		func(j, peer int) error {
			if perPeer {
				return c.send(sb[j*n:(j+1)*n], peer)
			}
			return c.send(sb, peer)
		}))
}

// NeighborAlltoallw is NeighborAlltoall with a derived datatype per block
// (MPI_Neighbor_alltoallw): block k sent is scounts[k] elements of
// stypes[k] starting sdispls[k] bytes into send, block k received
// rcounts[k] elements of rtypes[k] starting rdispls[k] bytes into recv —
// the faces of a subdomain and its ghost layers in place, each a
// ddt.Subarray or ddt.Vector of the whole array. What a rank sends a
// neighbour must pack to the size that neighbour expects (MPI's type
// signature rule, checked on sizes). send and recv may be one array (the
// interior faces and the ghost layers of a subdomain): no byte may then be
// written by two receive layouts or by a receive and read by a send
// (checked block by block, for layouts of up to 65 536 blocks in all;
// larger ones need separate buffers).
// Every block travels by endpoint's typed messages: packed as it goes
// out, or read from its blocks, never through a copy of the whole. The
// slices have one entry per neighbour (Neighbors); entries for ProcNull
// neighbours are not used but must be valid. c must have been made over
// g.Comm().
func NeighborAlltoallw(ctx context.Context, c *Coll, g *endpoint.Cart, send []byte, scounts, sdispls []int, stypes []*ddt.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*ddt.Type) error {
	if err := c.enter(callNeighborAlltoallw); err != nil {
		return err
	}
	nb, err := c.neighborSetup(g)
	if err != nil {
		return c.fail(err)
	}
	sl, err := wlayout("send", send, scounts, sdispls, stypes, len(nb))
	if err != nil {
		return c.fail(err)
	}
	rl, err := wlayout("recv", recv, rcounts, rdispls, rtypes, len(nb))
	if err != nil {
		return c.fail(err)
	}
	if overlap(send, recv) {
		if err := c.disjoint(nb, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes); err != nil {
			return c.fail(err)
		}
	}
	if err := c.ready(ctx, callSig{call: callNeighborAlltoallw, root: -1, count: -1, esize: 1}); err != nil {
		return c.fail(err)
	}
	return c.done(c.neighborRound(ctx, nb,
		func(k, peer int) error {
			if !rl[k].packed {
				return c.recv(rl[k].contig, peer)
			}
			return c.recvTyped(recv[rdispls[k]:], rcounts[k], rtypes[k], rl[k].n, peer)
		},
		func(k, peer int) error {
			if !sl[k].packed {
				return c.send(sl[k].contig, peer)
			}
			return c.sendTyped(send[sdispls[k]:], scounts[k], stypes[k], peer)
		}))
}
