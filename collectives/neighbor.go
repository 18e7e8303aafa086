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

// The neighbourhood collectives (MPI's MPI_Neighbor_allgather,
// MPI_Neighbor_alltoall and MPI_Neighbor_alltoallw) over a communicator
// with a topology, an endpoint.Cart or an endpoint.Graph: each rank
// exchanges blocks with its neighbours only, the halo exchange of a
// stencil code or of an unstructured mesh's partition in one call.
//
// Receive block k comes from source k and send block k goes to
// destination k of the topology's Neighbors. A Cart's are, for each
// dimension i in order, the rank one step down and the rank one step up
// (endpoint.Cart.Shift(i, 1)): block 2i goes to and comes from the rank
// below, block 2i+1 the rank above. Where the grid ends (a dimension that
// does not wrap) the neighbour is endpoint.ProcNull: nothing is sent
// there and the receive block is left as it was. A dimension that wraps
// with an extent of 1 or 2 has the same rank below and above (this rank
// itself at extent 1); block 2i still receives what that rank sent up,
// block 2i+1 what it sent down. A Graph's are the lists it was made
// with; an edge listed twice carries two blocks, paired in list order.
//
// Between two ranks the messages of one call go in a fixed order and
// each rank posts its receives in the matching order, so that they pair
// up by MPI's non-overtaking rule even when one rank is a neighbour
// twice: a Graph's in list order; a Cart's by dimension, the block sent
// up before the block sent down.

// neighbors is the topology of a neighbourhood call: receive block k
// comes from src[k], send block k goes to dst[k]; cart orders the sends
// of each dimension's pair up before down.
type neighbors struct {
	src, dst []int
	cart     bool
}

// neighborSetup checks that c was made over t's communicator and returns
// its neighbours (kept by c for the next call on the same topology).
func (c *Coll) neighborSetup(t endpoint.Topology) (neighbors, error) {
	if t == nil || t.Comm() == nil {
		return neighbors{}, fmt.Errorf("nil topology: %w", ErrInvalid)
	}
	if t.Comm() != c.parent {
		return neighbors{}, fmt.Errorf("the handle was not made over the topology's communicator (collectives.New(ctx, t.Comm())): %w", ErrInvalid)
	}
	if c.nbTopo != t {
		src, dst, err := t.Neighbors()
		if err != nil {
			return neighbors{}, err
		}
		_, cart := t.(*endpoint.Cart)
		c.nbTopo, c.nbrs = t, neighbors{src: src, dst: dst, cart: cart}
	}
	return c.nbrs, nil
}

// neighborRound posts the receives and sends of one neighbourhood call in
// the order the package comment gives, and waits for them: recv(k, peer)
// and send(k, peer) post block k's.
func (c *Coll) neighborRound(ctx context.Context, nb neighbors, recv, send func(k, peer int) error) error {
	for k, p := range nb.src {
		if p != endpoint.ProcNull {
			if err := recv(k, p); err != nil {
				return err
			}
		}
	}
	for j := range nb.dst {
		k := j
		if nb.cart {
			k ^= 1 // up, then down
		}
		if p := nb.dst[k]; p != endpoint.ProcNull {
			if err := send(k, p); err != nil {
				return err
			}
		}
	}
	return c.wait(ctx)
}

// disjointCall is the arguments of the last NeighborAlltoallw whose
// layouts (Coll.nbw) were made and found apart: a halo exchange
// repeated with the same ones (the usual case) reuses them.
type disjointCall struct {
	topo           endpoint.Topology
	send, recv     []byte
	sc, sd, rc, rd []int
	st, rt         []*ddt.Type
}

// same reports whether the arguments are those of the last call checked.
func (d *disjointCall) same(t endpoint.Topology, send []byte, sc, sd []int, st []*ddt.Type,
	recv []byte, rc, rd []int, rt []*ddt.Type) bool {
	sameBytes := func(a, b []byte) bool {
		return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
	}
	return d.topo == t && d.topo != nil && sameBytes(d.send, send) && sameBytes(d.recv, recv) &&
		slices.Equal(d.sc, sc) && slices.Equal(d.sd, sd) && slices.Equal(d.st, st) &&
		slices.Equal(d.rc, rc) && slices.Equal(d.rd, rd) && slices.Equal(d.rt, rt)
}

// set records the arguments of a call found apart (copies of the slices,
// which the caller may change).
func (d *disjointCall) set(t endpoint.Topology, send []byte, sc, sd []int, st []*ddt.Type,
	recv []byte, rc, rd []int, rt []*ddt.Type) {
	d.topo, d.send, d.recv = t, send, recv
	d.sc, d.sd, d.rc, d.rd = append(d.sc[:0], sc...), append(d.sd[:0], sd...), append(d.rc[:0], rc...), append(d.rd[:0], rd...)
	d.st, d.rt = append(d.st[:0], st...), append(d.rt[:0], rt...)
}

// maxCheckedBlocks bounds the blocks disjoint compares.
const maxCheckedBlocks = 1 << 16

// disjoint checks, for send and recv slices that overlap (a halo
// exchange within one array), that no byte a receive layout writes is
// one a send layout reads or another receive layout writes, block by
// block. Layouts of more than maxCheckedBlocks blocks in all are refused:
// pass separate buffers for them.
func (c *Coll) disjoint(nb neighbors, send []byte, scounts, sdispls []int, stypes []*ddt.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*ddt.Type) error {
	base := func(b []byte) int64 { return int64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
	collect := func(segs []ddt.Segment, peers []int, b []byte, counts, displs []int, types []*ddt.Type) ([]ddt.Segment, error) {
		for k, p := range peers {
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
	r, err := collect(c.segs[:0], nb.src, recv, rcounts, rdispls, rtypes)
	c.segs = r
	if err != nil {
		return err
	}
	nr := len(r)
	all, err := collect(r, nb.dst, send, scounts, sdispls, stypes)
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

// NeighborAllgather sends send to every destination of this rank in the
// topology t and receives each source's send into its block of recv
// (MPI_Neighbor_allgather): recv holds one block of len(send) elements
// per source, in the order of t.Neighbors; a block whose source is
// ProcNull is left as it was. c must have been made over t.Comm(), and
// every rank must pass the same len(send).
func NeighborAllgather[T any](ctx context.Context, c *Coll, t endpoint.Topology, send, recv []T) error {
	return neighborBlocks(ctx, c, callNeighborAllgather, t, send, recv, false)
}

// NeighborAlltoall sends block k of send to destination k of this rank
// in the topology t and receives block k of recv from source k
// (MPI_Neighbor_alltoall): send holds one block per destination and recv
// one per source, all of the same size, in the order of t.Neighbors.
// Blocks for and from ProcNull neighbours are neither sent nor written.
// c must have been made over t.Comm(), and every rank must pass the same
// block size.
func NeighborAlltoall[T any](ctx context.Context, c *Coll, t endpoint.Topology, send, recv []T) error {
	return neighborBlocks(ctx, c, callNeighborAlltoall, t, send, recv, true)
}

// neighborEnter begins neighbourhood call id over t on c: the element
// size of T and t's neighbours, or the call's error (the handle's, or
// failed through c.fail).
func neighborEnter[T any](c *Coll, id callID, t endpoint.Topology) (int, neighbors, error) {
	if err := c.enter(id); err != nil {
		return 0, neighbors{}, err
	}
	es, err := elemSize[T]()
	if err != nil {
		return 0, neighbors{}, c.fail(err)
	}
	nb, err := c.neighborSetup(t)
	if err != nil {
		return 0, neighbors{}, c.fail(err)
	}
	return es, nb, nil
}

// neighborBlocks is NeighborAlltoall (perPeer: a block of send per
// destination) or NeighborAllgather (send whole to each).
func neighborBlocks[T any](ctx context.Context, c *Coll, id callID, t endpoint.Topology, send, recv []T, perPeer bool) error {
	es, nb, err := neighborEnter[T](c, id, t)
	if err != nil {
		return err
	}
	k := len(send) // elements per block
	switch {
	case !perPeer:
	case len(nb.dst) > 0:
		k = len(send) / len(nb.dst)
	case len(nb.src) > 0:
		k = len(recv) / len(nb.src)
	}
	if perPeer && k*len(nb.dst) != len(send) || k*len(nb.src) != len(recv) {
		return c.fail(fmt.Errorf("send holds %d elements and recv %d, want blocks of one size, %d to send and %d to receive: %w",
			len(send), len(recv), len(nb.dst), len(nb.src), ErrInvalid))
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

// NeighborAllgatherv is NeighborAllgather with blocks of their own sizes
// (MPI_Neighbor_allgatherv): send goes whole to every destination, and
// source k's lands in recv[rdispls[k]:rdispls[k]+rcounts[k]] (counts and
// displacements in elements, one entry per source in the order of
// t.Neighbors). A source must send the count this rank expects from it
// (a longer message is ErrTruncated here; a shorter one leaves the rest
// of its block as it was). Receive blocks must not overlap, nor send and
// recv; entries for ProcNull sources are not used but must be valid.
func NeighborAllgatherv[T any](ctx context.Context, c *Coll, t endpoint.Topology, send, recv []T, rcounts, rdispls []int) error {
	return neighborV(ctx, c, callNeighborAllgatherv, t, send, nil, nil, recv, rcounts, rdispls)
}

// NeighborAlltoallv is NeighborAlltoall with blocks of their own sizes
// (MPI_Neighbor_alltoallv): block k sent is send[sdispls[k]:sdispls[k]+
// scounts[k]], to destination k, and block k received lands in
// recv[rdispls[k]:rdispls[k]+rcounts[k]], from source k (elements; one
// entry per destination and per source, in the order of t.Neighbors).
// Counts must agree as for NeighborAllgatherv, whose other rules hold too.
func NeighborAlltoallv[T any](ctx context.Context, c *Coll, t endpoint.Topology, send []T, scounts, sdispls []int,
	recv []T, rcounts, rdispls []int) error {
	if scounts == nil || sdispls == nil {
		if err := c.enter(callNeighborAlltoallv); err != nil {
			return err
		}
		return c.fail(fmt.Errorf("send counts and displacements are required: %w", ErrInvalid))
	}
	return neighborV(ctx, c, callNeighborAlltoallv, t, send, scounts, sdispls, recv, rcounts, rdispls)
}

// neighborV is NeighborAlltoallv, or with scounts nil NeighborAllgatherv.
func neighborV[T any](ctx context.Context, c *Coll, id callID, t endpoint.Topology, send []T, scounts, sdispls []int,
	recv []T, rcounts, rdispls []int) error {
	es, nb, err := neighborEnter[T](c, id, t)
	if err != nil {
		return err
	}
	if scounts != nil {
		if err := vlayout("send", scounts, sdispls, len(nb.dst), len(send), false); err != nil {
			return c.fail(err)
		}
	}
	if err := vlayout("recv", rcounts, rdispls, len(nb.src), len(recv), true); err != nil {
		return c.fail(err)
	}
	sb, rb := bytesOf(send), bytesOf(recv)
	if overlap(sb, rb) {
		return c.fail(fmt.Errorf("send and recv overlap: %w", ErrInvalid))
	}
	if err := c.ready(ctx, callSig{call: id, root: -1, count: -1, esize: es}); err != nil {
		return c.fail(err)
	}
	return c.done(c.neighborRound(ctx, nb,
		func(k, peer int) error { return c.recv(rb[rdispls[k]*es:(rdispls[k]+rcounts[k])*es], peer) },
		func(k, peer int) error {
			if scounts == nil {
				return c.send(sb, peer)
			}
			return c.send(sb[sdispls[k]*es:(sdispls[k]+scounts[k])*es], peer)
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
// send slices have one entry per destination and the recv slices one per
// source (t.Neighbors); entries for ProcNull neighbours are not used but
// must be valid. c must have been made over t.Comm().
func NeighborAlltoallw(ctx context.Context, c *Coll, t endpoint.Topology, send []byte, scounts, sdispls []int, stypes []*ddt.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*ddt.Type) error {
	if err := c.enter(callNeighborAlltoallw); err != nil {
		return err
	}
	nb, err := c.neighborSetup(t)
	if err != nil {
		return c.fail(err)
	}
	sl, rl := c.nbw[0], c.nbw[1]
	if !c.checked.same(t, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes) {
		// New arguments: their layouts, checked (a halo exchange repeated
		// with the same ones reuses them).
		c.checked.topo = nil
		if sl, err = wlayout(sl, "send", send, scounts, sdispls, stypes, len(nb.dst)); err != nil {
			return c.fail(err)
		}
		if rl, err = wlayout(rl, "recv", recv, rcounts, rdispls, rtypes, len(nb.src)); err != nil {
			return c.fail(err)
		}
		c.nbw[0], c.nbw[1] = sl, rl
		if overlap(send, recv) {
			if err := c.disjoint(nb, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes); err != nil {
				return c.fail(err)
			}
		}
		c.checked.set(t, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes)
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
