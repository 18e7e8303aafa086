package onesided

import (
	"context"
)

// Group is the set of processes a window or heap spans. Collective calls
// (Allocate, Create, Fence, Free, NewHeap, Heap.Alloc, Heap.Barrier) must be
// made by every member, in the same order.
//
// endpoint.Comm implements Group; so does the value returned by
// JobGroup.
type Group interface {
	// Rank is this process's index in the group, in [0, Size()).
	Rank() int
	// Size is the number of processes in the group.
	Size() int
	// Barrier returns once every member has entered it.
	Barrier(ctx context.Context) error
	// Allgather returns every member's data, indexed by rank. Sizes may
	// differ between members.
	Allgather(ctx context.Context, data []byte) ([][]byte, error)
}
