// Package collectives implements MPI's collective operations over
// endpoint communicators: Barrier, Bcast, Reduce, Allreduce, Gather(v),
// Scatter(v), Allgather(v), Alltoall(v), ReduceScatter(Block), Scan and
// Exscan, generic over the element type, with MPI's reduction operations
// and user operations, and their typed forms on ddt layouts (BcastTyped,
// GatherTyped, GathervTyped, ..., ScanTyped, and Alltoallw).
//
// A Coll is a handle over an *endpoint.Comm (the world communicator, one
// from Dup or Split, or an endpoint handle from CreateEndpoints, each of
// which is a rank): New duplicates the communicator so that collective
// messages never match the user's point-to-point messages, and every
// collective takes the handle:
//
//	c, err := collectives.New(ctx, comm)
//	defer c.Free()
//	err = collectives.Allreduce(ctx, c, local, global, collectives.Sum[float64]())
//
// Every rank calls the same collectives in the same order with matching
// arguments; a handle, like an endpoint handle, is driven by one goroutine
// at a time. The blocking calls take a context: when it ends, the call
// returns an error wrapping ctx.Err().
//
// Element types are any pointer-free Go type (numbers, arrays and structs
// of numbers); the reductions take an Op for the type: Sum, Prod, Min,
// Max, LAnd, LOr, LXor, BAnd, BOr, BXor, MinLoc and MaxLoc (on Loc pairs),
// or NewOp with a Go function, commutative or not. In-place forms pass
// nil for the buffer MPI would give MPI_IN_PLACE.
//
// Algorithms are chosen by message size (binomial trees, recursive
// doubling, Rabenseifner, Bruck, ring, pairwise exchange; see
// docs/collectives.md), can be forced per collective (WithAlgorithm,
// WEFT_TUNE's coll* keys), and in deterministic mode (Deterministic) every
// reduction combines in rank order, so that its result is bitwise the same
// whatever the algorithm.
//
// Barrier, Bcast, Reduce, Allreduce, Allgather, Gather and Scatter, and
// their typed forms, are hierarchical: the ranks of one process (endpoint
// handles) combine through the process's memory, the processes of one
// node through a segment of node shared memory, and only one leader per
// node sends messages (WithHierarchy, WEFT_TUNE collhier;
// docs/collectives.md, "Hierarchy"). Gatherv, Scatterv and Allgatherv
// (typed or not) combine the ranks of each process, whose leaders then
// exchange one message per pair of processes.
//
// Every collective has a nonblocking form (Ibarrier, Iallreduce, ...)
// returning a Request to Wait for or Test: the same algorithm, advanced
// round by round whenever the handle is driven, or by the process's
// progress goroutine (WithProgress). Several may be in flight on one
// handle and completed in any order.
//
// A mismatch between ranks (another collective, root, count or operation)
// that reaches a waiting rank in its messages, and a rank that fails or
// whose context ends, make the others' calls return an error instead of
// waiting for ever; WithChecks adds an agreement round that catches every
// argument mismatch before a call runs. After a failed call the handle is
// unusable (its calls return ErrClosed): free it and make a new one.
package collectives
