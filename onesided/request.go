package onesided

import (
	"context"
	"fmt"
)

// Request is the completion of one request-based operation (MPI_Rput,
// MPI_Rget, MPI_Raccumulate): Wait or Test says when the operation is
// complete at this rank — an Rput's or Raccumulate's data may be reused,
// an Rget's destination holds the data — without a flush of everything
// else issued to the target. Completion at the target still takes a
// Flush. A Request belongs to its window's rank; the zero Request is
// complete.
type Request struct {
	w *Window
	n uint64 // the operations issued up to this one (netPath.issued)
}

// request returns the Request of the operation w has just issued to
// target: complete already when it went by direct stores (for an atomic:
// unless atomics go through libfabric).
func (w *Window) request(target int, atomic bool) *Request {
	if w.net == nil || w.peers[target] != nil && !(atomic && w.atomicsNet) {
		return &Request{}
	}
	return &Request{w: w, n: w.net.issued()}
}

// Rput is Put returning a Request (MPI_Rput): once it completes, data may
// be modified.
func (w *Window) Rput(target, offset int, data []byte) (*Request, error) {
	if err := w.Put(target, offset, data); err != nil {
		return nil, err
	}
	return w.request(target, false), nil
}

// Rget is Get returning a Request (MPI_Rget): once it completes, dst holds
// the data.
func (w *Window) Rget(target, offset int, dst []byte) (*Request, error) {
	if err := w.Get(target, offset, dst); err != nil {
		return nil, err
	}
	return w.request(target, false), nil
}

// Raccumulate is Accumulate returning a Request (MPI_Raccumulate): once it
// completes, data may be modified and the update has been applied.
func (w *Window) Raccumulate(target, offset int, t AtomicType, op Op, data []byte) (*Request, error) {
	if err := w.Accumulate(target, offset, t, op, data); err != nil {
		return nil, err
	}
	return w.request(target, true), nil
}

// Wait waits, driving progress, until r's operation is complete at this
// rank (MPI_Wait on an RMA request). It returns ctx's error if ctx ends
// first, ErrClosed once the window is freed.
func (r *Request) Wait(ctx context.Context) error {
	if r == nil {
		return fmt.Errorf("onesided: Wait on a nil request: %w", ErrInvalid)
	}
	if r.w == nil {
		return nil
	}
	if r.w.closed {
		return fmt.Errorf("onesided: Request.Wait: %w", ErrClosed)
	}
	if err := r.w.net.waitIssued(ctx, r.n); err != nil {
		return fmt.Errorf("onesided: Request.Wait: %w", err)
	}
	r.w = nil
	return nil
}

// Test reports whether r's operation is complete at this rank, driving
// progress once (MPI_Test on an RMA request).
func (r *Request) Test() (bool, error) {
	if r == nil {
		return false, fmt.Errorf("onesided: Test on a nil request: %w", ErrInvalid)
	}
	if r.w == nil {
		return true, nil
	}
	if r.w.closed {
		return false, fmt.Errorf("onesided: Request.Test: %w", ErrClosed)
	}
	done, err := r.w.net.issuedDone(r.n)
	if err != nil {
		return false, fmt.Errorf("onesided: Request.Test: %w", err)
	}
	if done {
		r.w = nil
	}
	return done, nil
}

// WaitAll waits for every request of reqs (nil entries skipped), and
// returns the first error.
func WaitAll(ctx context.Context, reqs ...*Request) error {
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if err := r.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}
