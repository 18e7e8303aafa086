package collectives

import (
	"context"
	"fmt"
)

// Alltoall sends block j of every rank's send, send[j·n:(j+1)·n], to rank
// j, which stores it as block i (i the sender) of its recv: len(send) =
// len(recv) = Size()·n, n the same on every rank. In place: send == nil,
// the blocks to send taken from recv (copied first). Small blocks: every
// rank posts all its receives and sends at once (Linear); large ones: p-1
// steps exchanging with one partner each (Pairwise). The two send the
// same messages, so ranks may pick differently (by WEFT_TUNE).
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
	if c.hierFor(CollAlltoall, 0) {
		return hierAlltoall(ctx, c, bytesOf(send), bytesOf(recv), callSig{call: callAlltoall, root: -1, count: n, esize: es})
	}
	if err := c.ready(ctx, callSig{call: callAlltoall, root: -1, count: n, esize: es}); err != nil {
		return c.fail(err)
	}
	nb := n * es
	rb := bytesOf(recv)
	var sb []byte
	if send == nil {
		sb = c.buf(0, len(rb))
		copy(sb, rb)
	} else {
		sb = bytesOf(send)
	}
	off := func(i int) int { return i * nb }
	end := func(i int) int { return (i + 1) * nb }
	alg := c.cfg.pick(CollAlltoall, nb, c.size)
	return c.done(c.alltoall(ctx, sb, off, end, rb, off, end, alg))
}

// alltoall moves block j of sb (sb[soff(j):send(j)]) to rank j and
// receives rank i's into rb[roff(i):rend(i)].
func (c *Coll) alltoall(ctx context.Context, sb []byte, soff, sEnd func(int) int, rb []byte, roff, rend func(int) int, alg Algorithm) error {
	p, me := c.size, c.rank
	sblock := func(j int) []byte { return sb[soff(j):sEnd(j)] }
	rblock := func(i int) []byte { return rb[roff(i):rend(i)] }
	copy(rblock(me), sblock(me))
	if alg == Pairwise {
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

// Alltoallv sends send[sdispls[j]:sdispls[j]+scounts[j]] to rank j, which
// stores what rank i sent at recv[rdispls[i]:rdispls[i]+rcounts[i]];
// scounts[j] on rank i must equal rcounts[i] on rank j. Receive regions
// must not overlap. In place: send == nil (scounts and sdispls nil too),
// what is sent taken from recv with rcounts and rdispls (copied first).
// Algorithms as Alltoall's, chosen by this rank's average block.
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
		copy(sb, rb)
		scounts, sdispls = rcounts, rdispls
	} else {
		sb = bytesOf(send)
	}
	total := 0
	for _, n := range scounts {
		total += n
	}
	alg := c.cfg.pick(CollAlltoall, total*es/c.size, c.size)
	return c.done(c.alltoall(ctx, sb,
		func(j int) int { return sdispls[j] * es }, func(j int) int { return (sdispls[j] + scounts[j]) * es },
		rb, func(i int) int { return rdispls[i] * es }, func(i int) int { return (rdispls[i] + rcounts[i]) * es }, alg))
}
