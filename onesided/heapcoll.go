package onesided

import (
	"context"
	"fmt"
)

// OpenSHMEM's collectives on the heap's group (its world team):
// broadcast, collect, all-to-all and reduction on symmetric objects. Each
// is collective over the group, every rank passing the same arguments,
// and synchronising: it begins with a Barrier, so that no rank writes an
// object another rank may still be using from an earlier call, and ends
// with one, so that on return every rank's destination holds the result
// and its source may be written again. The data moves with the heap's own
// Put and Get, direct stores between ranks of a node and libfabric RMA
// between the others.

// Broadcast copies the first nbytes of root's src into dst on every rank,
// root included (shmem_broadcastmem).
func (h *Heap) Broadcast(ctx context.Context, dst, src Sym, nbytes, root int) error {
	if err := h.usable("Broadcast"); err != nil {
		return err
	}
	if err := h.collCheck("Broadcast", dst, src, nbytes, nbytes); err != nil {
		return err
	}
	if root < 0 || root >= h.w.Size() {
		return fmt.Errorf("onesided: Heap.Broadcast: root %d of %d ranks: %w", root, h.w.Size(), ErrInvalid)
	}
	return h.collRound(ctx, "Broadcast", func() error {
		if h.w.Rank() != root {
			return nil
		}
		data := h.Local(src)[:nbytes]
		for r := range h.w.Size() {
			if err := h.Put(r, dst, 0, data); err != nil {
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
	if err := h.collCheck("Collect", dst, src, nbytes*h.w.Size(), nbytes); err != nil {
		return err
	}
	return h.collRound(ctx, "Collect", func() error {
		data, me := h.Local(src)[:nbytes], h.w.Rank()
		for i := range h.w.Size() {
			r := (me + i) % h.w.Size() // each rank starts with a different target
			if err := h.Put(r, dst, me*nbytes, data); err != nil {
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
	n := nbytes * h.w.Size()
	if err := h.collCheck("Alltoall", dst, src, n, n); err != nil {
		return err
	}
	return h.collRound(ctx, "Alltoall", func() error {
		all, me := h.Local(src), h.w.Rank()
		for i := range h.w.Size() {
			r := (me + i) % h.w.Size()
			if err := h.Put(r, dst, me*nbytes, all[r*nbytes:(r+1)*nbytes]); err != nil {
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
	if err := checkOp(t, op); err != nil || op == OpReplace || op == OpNoOp {
		return fmt.Errorf("onesided: Heap.Reduce(%v, %v): %w", op, t, ErrInvalid)
	}
	sz := t.Size()
	if count < 0 {
		return fmt.Errorf("onesided: Heap.Reduce: count %d: %w", count, ErrInvalid)
	}
	n := count * sz
	if err := h.collCheck("Reduce", dst, src, n, n); err != nil {
		return err
	}
	p := h.w.Size()
	all := make([]byte, p*n)
	if err := h.Barrier(ctx); err != nil {
		return fmt.Errorf("onesided: Heap.Reduce: %w", err)
	}
	for r := range p {
		if err := h.Get(r, src, 0, all[r*n:(r+1)*n]); err != nil {
			return fmt.Errorf("onesided: Heap.Reduce: %w", err)
		}
	}
	if err := h.Quiet(ctx); err != nil { // the Gets have landed
		return fmt.Errorf("onesided: Heap.Reduce: %w", err)
	}
	// Every rank has read every source before any rank writes dst, which
	// may be src.
	if err := h.Barrier(ctx); err != nil {
		return fmt.Errorf("onesided: Heap.Reduce: %w", err)
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
// src srcBytes, both allocated objects of h.
func (h *Heap) collCheck(op string, dst, src Sym, dstBytes, srcBytes int) error {
	if dstBytes < 0 || srcBytes < 0 {
		return fmt.Errorf("onesided: Heap.%s: negative size: %w", op, ErrInvalid)
	}
	if _, err := h.at(op, dst, 0, dstBytes); err != nil {
		return err
	}
	_, err := h.at(op, src, 0, srcBytes)
	return err
}

// collRound runs a heap collective's puts between two barriers.
func (h *Heap) collRound(ctx context.Context, op string, puts func() error) error {
	if err := h.Barrier(ctx); err != nil {
		return fmt.Errorf("onesided: Heap.%s: %w", op, err)
	}
	if err := puts(); err != nil {
		return fmt.Errorf("onesided: Heap.%s: %w", op, err)
	}
	if err := h.Barrier(ctx); err != nil { // Quiet, then every rank's puts are in
		return fmt.Errorf("onesided: Heap.%s: %w", op, err)
	}
	return nil
}
