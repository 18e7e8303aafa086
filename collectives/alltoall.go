package collectives

import (
	"context"
	"fmt"
	"slices"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/memcopy"
)

// Alltoall sends block j of every rank's send, send[j·n:(j+1)·n], to rank
// j, which stores it as block i (i the sender) of its recv: len(send) =
// len(recv) = Size()·n, n the same on every rank. In place: send == nil,
// the blocks to send taken from recv (copied first). Small blocks: every
// rank posts all its receives and sends at once (Linear); large ones: p-1
// steps exchanging with one partner each (Pairwise); blocks of up to 256
// bytes on 8 ranks or more over several nodes: Bruck's ⌈log₂ p⌉ rounds,
// each moving about half the blocks in one message. Linear and Pairwise
// send the same messages, so ranks may pick differently between those
// two. Ranks of one process, and small blocks between the processes of
// one node, go through memory instead (docs/collectives.md,
// "Hierarchy").
func Alltoall[T any](ctx context.Context, c *Coll, send, recv []T) error {
	if err := c.enter(callAlltoall); err != nil {
		return err
	}
	es, err := elemSize[T]()
	if err != nil {
		return c.fail(err)
	}
	if len(recv)%c.size != 0 {
		return c.fail(fmt.Errorf("alltoall into %d elements, not a multiple of %d ranks: %w", len(recv), c.size, ErrInvalid))
	}
	n := len(recv) / c.size
	if send != nil {
		if err := checkLen("send", len(send), len(recv)); err != nil {
			return c.fail(err)
		}
		if overlap(bytesOf(send), bytesOf(recv)) {
			return c.fail(errAlias)
		}
	}
	if c.hierFor(CollAlltoall, 0) || c.hierStreams(CollAlltoall, n*es) || c.symAlltoall(n*es) {
		return hierAlltoall(ctx, c, bytesOf(send), bytesOf(recv), callSig{call: callAlltoall, root: -1, count: n, esize: es})
	}
	if send != nil && c.localNB(CollAlltoall) {
		nb := n * es
		return c.runLocal(callSig{call: callAlltoall, root: -1, count: n, esize: es, alg: algLocal}, bytesOf(send), bytesOf(recv),
			noGive, func(slots []nbSlot) { localAlltoall(slots, nb) })
	}
	nb := n * es
	alg := c.alltoallAlg(nb, c.size)
	if err := c.ready(ctx, callSig{call: callAlltoall, root: -1, count: n, esize: es, alg: alltoallSig(alg)}); err != nil {
		return c.fail(err)
	}
	rb := bytesOf(recv)
	var sb []byte
	if send == nil {
		sb = c.buf(0, len(rb))
		memcopy.Copy(sb, rb)
	} else {
		sb = bytesOf(send)
	}
	return c.done(c.alltoall(ctx, func(j int) []byte { return sb[j*nb : (j+1)*nb] },
		func(i int) []byte { return rb[i*nb : (i+1)*nb] }, alg))
}

// alltoallAlg is the algorithm of an Alltoall (Alltoallv, Alltoallw) of
// blocks of nb bytes (on average) over p ranks: the selection's, except
// that where the communicator's ranks outnumber the cores of their
// machine (crowded) the linear exchange replaces the default rule's
// pairwise one. Pairwise's p-1 steps each wait for one partner, which
// on a crowded node may be waiting for a core, where the linear exchange
// posts every message at once and takes them in any order: 4 processes on
// 2 vCPUs, 16 KiB blocks 18.4 µs linear against 26.7 pairwise, 24 KiB
// 22.1 against 29.6, 1 MiB 767 against 1026 (docs/perf/collectives.md).
// The two exchange the same messages under the call's one tag, so ranks
// that judge their machines differently still pair their messages.
// Bruck's algorithm sends other messages than those two: it is chosen
// only by what every rank sees alike (the block size, the communicator
// size, the settings), and the call's signature names it (alltoallSig),
// so that ranks set differently never pair its messages with others.
func (c *Coll) alltoallAlg(nb, p int) Algorithm {
	a := c.cfg.pick(CollAlltoall, nb, p)
	if a == Pairwise && c.crowded && c.cfg.byRule(CollAlltoall, nb, p) {
		return Linear
	}
	return a
}

// alltoallvAlg is the algorithm of an Alltoallv or Alltoallw whose
// blocks average nb bytes: alltoallAlg's, but the linear exchange where
// that is Bruck's, which needs blocks of one size.
func (c *Coll) alltoallvAlg(nb, p int) Algorithm {
	if a := c.alltoallAlg(nb, p); a != Bruck {
		return a
	}
	return Linear
}

// alltoallSig is the algorithm an Alltoall's signature names: Bruck, or
// none for the two that exchange the same messages.
func alltoallSig(a Algorithm) Algorithm {
	if a == Bruck {
		return Bruck
	}
	return Auto
}

// alltoall moves sblock(j) to rank j and receives rank i's into
// rblock(i); with Bruck every block must have the same size.
func (c *Coll) alltoall(ctx context.Context, sblock, rblock func(int) []byte, alg Algorithm) error {
	p, me := c.size, c.rank
	memcopy.Copy(rblock(me), sblock(me))
	switch alg {
	case Bruck:
		return c.alltoallBruck(ctx, sblock, rblock)
	case Pairwise:
		pow2 := p&(p-1) == 0
		for s := 1; s < p; s++ {
			dst, src := (me+s)%p, (me-s+p)%p
			if pow2 {
				dst, src = me^s, me^s
			}
			if err := c.sendrecv(ctx, sblock(dst), dst, rblock(src), src); err != nil {
				return err
			}
		}
		return nil
	}
	for s := 1; s < p; s++ {
		src := (me - s + p) % p
		if err := c.recv(rblock(src), src); err != nil {
			return err
		}
	}
	for s := 1; s < p; s++ {
		dst := (me + s) % p
		if err := c.send(sblock(dst), dst); err != nil {
			return err
		}
	}
	return c.wait(ctx)
}

// alltoallBruck is Bruck's all-to-all, ⌈log₂ p⌉ rounds for any p:
// the blocks are first laid out so that index i holds the block for rank
// rank+i; in the round of distance d every block whose index has bit d
// set goes, packed with the others into one message, to rank rank+d,
// and the blocks from rank rank-d take their places. A block for rank
// r+i thus travels i ranks in the rounds of i's bits, and at the end
// index i holds the block from rank rank-i. Each round moves about half
// the blocks: fewer messages than the linear exchange's p-1 at the cost
// of copies, for small blocks on many ranks.
func (c *Coll) alltoallBruck(ctx context.Context, sblock, rblock func(int) []byte) error {
	p, me := c.size, c.rank
	nb := len(sblock(me))
	tmp := c.buf(1, p*nb)
	for i := 1; i < p; i++ {
		memcopy.Copy(tmp[i*nb:(i+1)*nb], sblock((me+i)%p))
	}
	most := 0 // the most blocks a round moves
	for d := 1; d < p; d <<= 1 {
		most = max(most, bruckCount(p, d))
	}
	pack := c.buf(2, 2*most*nb)
	for d := 1; d < p; d <<= 1 {
		cnt := bruckCount(p, d)
		out, in := pack[:cnt*nb], pack[cnt*nb:2*cnt*nb]
		j := 0
		for i := d; i < p; i++ {
			if i&d != 0 {
				copy(out[j*nb:(j+1)*nb], tmp[i*nb:(i+1)*nb])
				j++
			}
		}
		if err := c.sendrecv(ctx, out, (me+d)%p, in, (me-d+p)%p); err != nil {
			return err
		}
		j = 0
		for i := d; i < p; i++ {
			if i&d != 0 {
				copy(tmp[i*nb:(i+1)*nb], in[j*nb:(j+1)*nb])
				j++
			}
		}
	}
	for i := 1; i < p; i++ {
		memcopy.Copy(rblock((me-i+p)%p), tmp[i*nb:(i+1)*nb])
	}
	return nil
}

// bruckCount is how many of the indices 1..p-1 have bit d set: the
// blocks a round of Bruck's all-to-all moves.
func bruckCount(p, d int) int {
	// indices in [0, p) with bit d set: d of every 2d, and the tail's
	return p/(2*d)*d + max(p%(2*d)-d, 0)
}

// Alltoallv sends send[sdispls[j]:sdispls[j]+scounts[j]] to rank j, which
// stores what rank i sent at recv[rdispls[i]:rdispls[i]+rcounts[i]];
// scounts[j] on rank i must equal rcounts[i] on rank j. Receive regions
// must not overlap. In place: send == nil (scounts and sdispls nil too),
// what is sent taken from recv with rcounts and rdispls (copied first).
// Algorithms as Alltoall's, chosen by this rank's average block, but
// the linear exchange where Alltoall would take Bruck's (its rounds need
// blocks of one size).
func Alltoallv[T any](ctx context.Context, c *Coll, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) error {
	if err := c.enter(callAlltoallv); err != nil {
		return err
	}
	es, err := elemSize[T]()
	if err != nil {
		return c.fail(err)
	}
	if err := vlayout("alltoallv recv", rcounts, rdispls, c.size, len(recv), true); err != nil {
		return c.fail(err)
	}
	if send != nil {
		if err := vlayout("alltoallv send", scounts, sdispls, c.size, len(send), false); err != nil {
			return c.fail(err)
		}
		if overlap(bytesOf(send), bytesOf(recv)) {
			return c.fail(errAlias)
		}
	}
	if err := c.ready(ctx, callSig{call: callAlltoallv, root: -1, count: -1, esize: es}); err != nil {
		return c.fail(err)
	}
	rb := bytesOf(recv)
	var sb []byte
	if send == nil {
		sb = c.buf(0, len(rb))
		memcopy.Copy(sb, rb)
		scounts, sdispls = rcounts, rdispls
	} else {
		sb = bytesOf(send)
	}
	total := 0
	for _, n := range scounts {
		total += n
	}
	alg := c.alltoallvAlg(total*es/c.size, c.size)
	return c.done(c.alltoall(ctx, func(j int) []byte { return sb[sdispls[j]*es : (sdispls[j]+scounts[j])*es] },
		func(i int) []byte { return rb[rdispls[i]*es : (rdispls[i]+rcounts[i])*es] }, alg))
}

// Alltoallw is the all-to-all of derived datatypes, each block with its
// own layout: rank i sends scounts[j] elements of stypes[j], starting
// sdispls[j] bytes into send, to rank j, which unpacks them as rcounts[i]
// elements of rtypes[i] starting rdispls[i] bytes into its recv (the
// faces of a 3D block, say, each a ddt.Subarray of the whole). What
// rank i sends to j and what j expects from i must pack to the same
// number of bytes (MPI's type signature rule, checked on sizes);
// receive layouts must not overlap. In place: send == nil (its counts,
// displacements and types nil too), what is sent taken from recv with
// the receive layouts (copied first). Contiguous blocks travel in place;
// others are packed into scratch buffers and unpacked after they
// arrive. Algorithms as Alltoallv's, chosen by this rank's average
// packed block.
func Alltoallw(ctx context.Context, c *Coll, send []byte, scounts, sdispls []int, stypes []*ddt.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*ddt.Type) error {
	if err := c.enter(callAlltoallw); err != nil {
		return err
	}
	return alltoallw(ctx, c, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes)
}

// alltoallw is Alltoallw (or AlltoallvTyped) once the call has begun.
func alltoallw(ctx context.Context, c *Coll, send []byte, scounts, sdispls []int, stypes []*ddt.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*ddt.Type) error {
	p, me := c.size, c.rank
	inPlace := send == nil
	if inPlace {
		send, scounts, sdispls, stypes = recv, rcounts, rdispls, rtypes
	} else if overlap(send, recv) {
		return c.fail(errAlias)
	}
	sl, err := wlayout(c.wblocks[0], "send", send, scounts, sdispls, stypes, p)
	if err != nil {
		return c.fail(err)
	}
	rl, err := wlayout(c.wblocks[1], "recv", recv, rcounts, rdispls, rtypes, p)
	if err != nil {
		return c.fail(err)
	}
	if sl[me].n != rl[me].n {
		return c.fail(fmt.Errorf("alltoallw: this rank sends itself %d bytes and expects %d: %w", sl[me].n, rl[me].n, ErrInvalid))
	}
	total := 0
	for _, b := range sl {
		total += b.n
	}
	alg := c.alltoallvAlg(total/p, p)
	if err := c.ready(ctx, callSig{call: c.call, root: -1, count: -1, esize: 1}); err != nil {
		return c.fail(err)
	}
	// Scratch: packed send blocks, then packed receive blocks (also every
	// send block when in place, whose data the receives overwrite).
	var need int
	for j := range p {
		if sl[j].packed || inPlace {
			need += sl[j].n
		}
		if rl[j].packed {
			need += rl[j].n
		}
	}
	scratch := c.buf(0, need)
	at := 0
	sblk, rblk := make([][]byte, p), make([][]byte, p)
	for j := range p {
		b := sl[j]
		switch {
		case b.packed || inPlace:
			sblk[j] = scratch[at : at+b.n : at+b.n]
			at += b.n
			if !b.packed {
				memcopy.Copy(sblk[j], b.contig)
			} else if _, err := stypes[j].Pack(sblk[j], send[sdispls[j]:], scounts[j]); err != nil {
				return c.fail(fmt.Errorf("alltoallw: pack block %d (%d of %s): %w", j, scounts[j], stypes[j].Name(), err))
			}
		default:
			sblk[j] = b.contig
		}
	}
	for i := range p {
		if rl[i].packed {
			rblk[i] = scratch[at : at+rl[i].n : at+rl[i].n]
			at += rl[i].n
		} else {
			rblk[i] = rl[i].contig
		}
	}
	if err := c.alltoall(ctx, func(j int) []byte { return sblk[j] }, func(i int) []byte { return rblk[i] }, alg); err != nil {
		return c.fail(err)
	}
	for i := range p {
		if rl[i].packed {
			if _, err := rtypes[i].Unpack(recv[rdispls[i]:], rblk[i], rcounts[i]); err != nil {
				return c.fail(fmt.Errorf("alltoallw: unpack block %d (%d of %s): %w", i, rcounts[i], rtypes[i].Name(), err))
			}
		}
	}
	return c.done(nil)
}

// wblock is one block of Alltoallw: its packed size and where it lies
// when contiguous.
type wblock struct {
	contig []byte
	packed bool
	n      int
}

// wlayout checks Alltoallw's counts, byte displacements and types
// against buf.
func wlayout(dst []wblock, what string, buf []byte, counts, displs []int, types []*ddt.Type, p int) ([]wblock, error) {
	if len(counts) != p || len(displs) != p || len(types) != p {
		return nil, fmt.Errorf("alltoallw %s: %d counts, %d displacements and %d types for %d ranks: %w",
			what, len(counts), len(displs), len(types), p, ErrInvalid)
	}
	bs := slices.Grow(dst[:0], p)[:p]
	for j := range p {
		if displs[j] < 0 || displs[j] > len(buf) {
			return nil, fmt.Errorf("alltoallw %s: block %d at byte %d of a %d-byte buffer: %w", what, j, displs[j], len(buf), ErrInvalid)
		}
		contig, packed, n, err := typedLayout(buf[displs[j]:], counts[j], types[j])
		if err != nil {
			return nil, fmt.Errorf("alltoallw %s: block %d: %w", what, j, err)
		}
		bs[j] = wblock{contig, packed, n}
	}
	return bs, nil
}
