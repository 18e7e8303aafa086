package onesided

import (
	"context"
	"fmt"
)

// Team is a set of a heap's ranks with a barrier and collectives of its
// own (OpenSHMEM 1.5's teams, made by shmem_team_split_strided): members
// are numbered 0..Size()-1 in the team, and Put, Get and the atomics
// still name heap ranks (HeapRank translates). Teams may overlap; each
// synchronises through words of its own on the heap.
type Team struct {
	m       members
	syncSym Sym    // one barrier word per dissemination round
	epoch   uint64 // barriers completed
	closed  bool
}

// teamRounds is the number of barrier words of a team: dissemination
// rounds for up to 2^32 members.
const teamRounds = 32

// SplitStrided makes the team of the size heap ranks start, start+stride,
// start+2·stride, … (shmem_team_split_strided of the world team). It is
// collective over every rank of the heap, which all pass the same
// arguments: the team's barrier words are a symmetric object, allocated
// on every rank. A rank outside the team gets a Team whose Rank is -1,
// good only for Destroy. start must be a heap rank, stride and size
// positive, and the last member a heap rank (ErrInvalid otherwise).
func (h *Heap) SplitStrided(ctx context.Context, start, stride, size int) (*Team, error) {
	if err := h.usable("SplitStrided"); err != nil {
		return nil, err
	}
	n := h.w.Size()
	if start < 0 || start >= n || stride <= 0 || size <= 0 || size > n || (size-1) > (n-1-start)/stride {
		return nil, fmt.Errorf("onesided: Heap.SplitStrided(start %d, stride %d, size %d) of %d ranks: %w", start, stride, size, n, ErrInvalid)
	}
	sym, err := h.Alloc(ctx, 8*teamRounds, 8)
	if err != nil {
		return nil, fmt.Errorf("onesided: Heap.SplitStrided: %w", err)
	}
	t := &Team{m: members{h: h, what: "Team", ranks: make([]int, size), me: -1}, syncSym: sym}
	for i := range size {
		t.m.ranks[i] = start + i*stride
		if t.m.ranks[i] == h.w.Rank() {
			t.m.me = i
		}
	}
	t.m.sync = t.Barrier
	return t, nil
}

// Rank is this rank's index in the team, -1 if it is not a member
// (shmem_team_my_pe).
func (t *Team) Rank() int {
	if t == nil {
		return -1
	}
	return t.m.me
}

// Size is the number of members (shmem_team_n_pes).
func (t *Team) Size() int {
	if t == nil {
		return 0
	}
	return len(t.m.ranks)
}

// HeapRank is the heap rank of member i, or -1 when i is not a member's
// index (shmem_team_translate_pe to the world team).
func (t *Team) HeapRank(i int) int {
	if t == nil || i < 0 || i >= len(t.m.ranks) {
		return -1
	}
	return t.m.ranks[i]
}

// usable checks that t can run a team call: a member of an open team.
func (t *Team) usable(op string) error {
	if t == nil {
		return fmt.Errorf("onesided: Team.%s on a nil team: %w", op, ErrInvalid)
	}
	if t.closed {
		return fmt.Errorf("onesided: Team.%s: %w", op, ErrClosed)
	}
	if err := t.m.h.usable(op); err != nil {
		return err
	}
	if t.m.me < 0 {
		return fmt.Errorf("onesided: Team.%s: this rank is not a member: %w", op, ErrInvalid)
	}
	return nil
}

// Barrier completes this rank's operations (Quiet) and waits until every
// member has done the same (shmem_team_sync after shmem_quiet): a
// dissemination barrier over the team's words, in round k a signal to
// member me+2^k, of the team's barrier count.
func (t *Team) Barrier(ctx context.Context) error {
	if err := t.usable("Barrier"); err != nil {
		return err
	}
	h := t.m.h
	if err := h.Quiet(ctx); err != nil {
		return fmt.Errorf("onesided: Team.Barrier: %w", err)
	}
	t.epoch++
	e, n := t.epoch, len(t.m.ranks)
	for k, dist := 0, 1; dist < n; k, dist = k+1, dist*2 {
		if err := h.w.Signal(t.m.ranks[(t.m.me+dist)%n], t.syncSym.Off+8*k, e); err != nil {
			return fmt.Errorf("onesided: Team.Barrier: %w", err)
		}
		if _, err := h.w.WaitSignal(ctx, t.syncSym.Off+8*k, CmpGE, e); err != nil {
			return fmt.Errorf("onesided: Team.Barrier (round %d): %w", k, err)
		}
	}
	// The signals are delivered before any member may free the words.
	return h.w.FlushAll(ctx)
}

// Broadcast is Heap.Broadcast among the members: the first nbytes of
// member root's src into dst on every member.
func (t *Team) Broadcast(ctx context.Context, dst, src Sym, nbytes, root int) error {
	if err := t.usable("Broadcast"); err != nil {
		return err
	}
	return t.m.broadcast(ctx, dst, src, nbytes, root)
}

// Collect is Heap.Collect among the members: member i's first nbytes of
// src at i·nbytes of dst on every member.
func (t *Team) Collect(ctx context.Context, dst, src Sym, nbytes int) error {
	if err := t.usable("Collect"); err != nil {
		return err
	}
	return t.m.collect(ctx, dst, src, nbytes)
}

// Alltoall is Heap.Alltoall among the members: block j of src to member
// j, at block i of its dst for sending member i.
func (t *Team) Alltoall(ctx context.Context, dst, src Sym, nbytes int) error {
	if err := t.usable("Alltoall"); err != nil {
		return err
	}
	return t.m.alltoall(ctx, dst, src, nbytes)
}

// Reduce is Heap.Reduce among the members, combined in member order.
func (t *Team) Reduce(ctx context.Context, dst, src Sym, count int, typ AtomicType, op Op) error {
	if err := t.usable("Reduce"); err != nil {
		return err
	}
	return t.m.reduce(ctx, dst, src, count, typ, op)
}

// Destroy frees the team's barrier words (shmem_team_destroy). Like
// SplitStrided it is collective over every rank of the heap, members or
// not; later team calls give ErrClosed.
func (t *Team) Destroy(ctx context.Context) error {
	if t == nil {
		return fmt.Errorf("onesided: Team.Destroy on a nil team: %w", ErrInvalid)
	}
	if t.closed {
		return fmt.Errorf("onesided: Team.Destroy: %w", ErrClosed)
	}
	t.closed = true
	if err := t.m.h.Free(ctx, t.syncSym); err != nil {
		return fmt.Errorf("onesided: Team.Destroy: %w", err)
	}
	return nil
}
