package onesided

import (
	"context"
	"fmt"
)

// OpenSHMEM's collectives on the heap's group (its world team) and on a
// Team of its ranks: broadcast, collect, all-to-all and reduction on
// symmetric objects. Each is collective over the group or team, every
// member passing the same arguments, and synchronising: it begins with a Barrier, so that no rank writes an
// object another rank may still be using from an earlier call, and ends
// with one, so that on return every rank's destination holds the result
// and its source may be written again. The data moves with the heap's own
// Put and Get, direct stores between ranks of a node and libfabric RMA
// between the others.

// members is the ranks a heap collective spans: the heap's whole group
// or a Team's, and the barrier among them.
type members struct {
	h     *Heap
	what  string // "Heap" or "Team", for errors
	ranks []int  // each member's heap rank; nil: every heap rank
	me    int    // this rank's index among the members
	sync  func(context.Context) error
}

// world is the heap's whole group as members.
func (h *Heap) world() *members {
	return &members{h: h, what: "Heap", me: h.w.Rank(), sync: h.Barrier}
}

func (m *members) size() int {
	if m.ranks == nil {
		return m.h.w.Size()
	}
	return len(m.ranks)
}

// rank is member i's heap rank.
func (m *members) rank(i int) int {
	if m.ranks == nil {
		return i
	}
	return m.ranks[i]
}

// Broadcast copies the first nbytes of root's src into dst on every rank,
// root included (shmem_broadcastmem).
func (h *Heap) Broadcast(ctx context.Context, dst, src Sym, nbytes, root int) error {
	if err := h.usable("Broadcast"); err != nil {
		return err
	}
	return h.world().broadcast(ctx, dst, src, nbytes, root)
}

func (m *members) broadcast(ctx context.Context, dst, src Sym, nbytes, root int) error {
	if err := m.collCheck("Broadcast", dst, src, nbytes, nbytes); err != nil {
		return err
	}
	if root < 0 || root >= m.size() {
		return fmt.Errorf("onesided: %s.Broadcast: root %d of %d ranks: %w", m.what, root, m.size(), ErrInvalid)
	}
	return m.collRound(ctx, "Broadcast", func() error {
		if m.me != root {
			return nil
		}
		data := m.h.Local(src)[:nbytes]
		for i := range m.size() {
			if err := m.h.Put(m.rank(i), dst, 0, data); err != nil {
				return err
			}
		}
		return nil
	})
}

// Collect places every rank's first nbytes of src in dst on every rank,
// rank r's at r·nbytes (shmem_fcollectmem); dst holds Size()·nbytes.
func (h *Heap) Collect(ctx context.Context, dst, src Sym, nbytes int) error {
	if err := h.usable("Collect"); err != nil {
		return err
	}
	return h.world().collect(ctx, dst, src, nbytes)
}

func (m *members) collect(ctx context.Context, dst, src Sym, nbytes int) error {
	p := m.size()
	if err := m.collCheck("Collect", dst, src, nbytes*p, nbytes); err != nil {
		return err
	}
	return m.collRound(ctx, "Collect", func() error {
		data := m.h.Local(src)[:nbytes]
		for i := range p {
			r := (m.me + i) % p // each member starts with a different target
			if err := m.h.Put(m.rank(r), dst, m.me*nbytes, data); err != nil {
				return err
			}
		}
		return nil
	})
}

// Alltoall sends block j of src (bytes j·nbytes to (j+1)·nbytes) to rank
// j, which places it at block i of its dst, i the sending rank
// (shmem_alltoallmem); src and dst hold Size()·nbytes.
func (h *Heap) Alltoall(ctx context.Context, dst, src Sym, nbytes int) error {
	if err := h.usable("Alltoall"); err != nil {
		return err
	}
	return h.world().alltoall(ctx, dst, src, nbytes)
}

func (m *members) alltoall(ctx context.Context, dst, src Sym, nbytes int) error {
	p := m.size()
	n := nbytes * p
	if err := m.collCheck("Alltoall", dst, src, n, n); err != nil {
		return err
	}
	return m.collRound(ctx, "Alltoall", func() error {
		all := m.h.Local(src)
		for i := range p {
			r := (m.me + i) % p
			if err := m.h.Put(m.rank(r), dst, m.me*nbytes, all[r*nbytes:(r+1)*nbytes]); err != nil {
				return err
			}
		}
		return nil
	})
}

// Reduce combines count elements of type t of every rank's src with op,
// element by element, and stores the result in dst on every rank
// (shmem_TYPE_OP_reduce on the world team): OpSum, OpMin, OpMax and, on
// integer types, OpBand, OpBor, OpBxor. Every rank reads every rank's
// source and combines them in rank order, so every rank gets the same
// bits, floating-point sums included. dst may be src.
func (h *Heap) Reduce(ctx context.Context, dst, src Sym, count int, t AtomicType, op Op) error {
	if err := h.usable("Reduce"); err != nil {
		return err
	}
	return h.world().reduce(ctx, dst, src, count, t, op)
}

func (m *members) reduce(ctx context.Context, dst, src Sym, count int, t AtomicType, op Op) error {
	h := m.h
	if err := checkOp(t, op); err != nil || op == OpReplace || op == OpNoOp {
		return fmt.Errorf("onesided: %s.Reduce(%v, %v): %w", m.what, op, t, ErrInvalid)
	}
	sz := t.Size()
	if count < 0 {
		return fmt.Errorf("onesided: %s.Reduce: count %d: %w", m.what, count, ErrInvalid)
	}
	n := count * sz
	if err := m.collCheck("Reduce", dst, src, n, n); err != nil {
		return err
	}
	p := m.size()
	all := make([]byte, p*n)
	if err := m.sync(ctx); err != nil {
		return fmt.Errorf("onesided: %s.Reduce: %w", m.what, err)
	}
	for i := range p {
		if err := h.Get(m.rank(i), src, 0, all[i*n:(i+1)*n]); err != nil {
			return fmt.Errorf("onesided: %s.Reduce: %w", m.what, err)
		}
	}
	if err := h.Quiet(ctx); err != nil { // the Gets have landed
		return fmt.Errorf("onesided: %s.Reduce: %w", m.what, err)
	}
	// Every member has read every source before any member writes dst,
	// which may be src.
	if err := m.sync(ctx); err != nil {
		return fmt.Errorf("onesided: %s.Reduce: %w", m.what, err)
	}
	out := h.Local(dst)
	for i := 0; i < n; i += sz {
		acc := loadElem(all[i:], sz)
		for r := 1; r < p; r++ {
			acc = combine(t, op, acc, loadElem(all[r*n+i:], sz))
		}
		storeElem(out[i:], sz, acc)
	}
	return nil
}

// collCheck checks a heap collective's objects: dst must hold dstBytes,
// src srcBytes, both allocated objects of the heap.
func (m *members) collCheck(op string, dst, src Sym, dstBytes, srcBytes int) error {
	if dstBytes < 0 || srcBytes < 0 {
		return fmt.Errorf("onesided: %s.%s: negative size: %w", m.what, op, ErrInvalid)
	}
	if _, err := m.h.at(op, dst, 0, dstBytes); err != nil {
		return err
	}
	_, err := m.h.at(op, src, 0, srcBytes)
	return err
}

// collRound runs a heap collective's puts between two barriers.
func (m *members) collRound(ctx context.Context, op string, puts func() error) error {
	if err := m.sync(ctx); err != nil {
		return fmt.Errorf("onesided: %s.%s: %w", m.what, op, err)
	}
	if err := puts(); err != nil {
		return fmt.Errorf("onesided: %s.%s: %w", m.what, op, err)
	}
	if err := m.sync(ctx); err != nil { // Quiet, then every member's puts are in
		return fmt.Errorf("onesided: %s.%s: %w", m.what, op, err)
	}
	return nil
}
