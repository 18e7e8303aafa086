// Package onesided provides one-sided communication for weft: RMA windows
// (Put, Get, Accumulate, FetchAndOp, CompareAndSwap, Flush, Fence),
// put-with-signal (PutSignal, WaitSignal, TestSignal), a tiled
// communication/computation overlap pipeline, and a symmetric heap for PGAS
// runtimes.
//
// # Groups
//
// Every collective call here runs over a [Group]: anything with a rank, a
// size, a barrier and an allgather. endpoint.Comm satisfies it, and
// [JobGroup] builds one from the launcher's exchange (package job) so windows
// work before (or without) an endpoint communicator.
//
// # Paths
//
// A window reaches each target rank through one of two paths:
//
//   - direct store: ranks on the same node map one /dev/shm file; Put, Get,
//     signals and atomics become loads and stores through sync/atomic;
//   - libfabric: each window opens its own endpoint, completion queue and
//     address vector in the group's domain (or its own), registers each
//     rank's region and exchanges keys and base addresses with Allgather.
//
// WithSharedMemory (env WEFT_ONESIDED_SHM=auto|on|off) picks between them.
//
// # Completion
//
// Put, Get and the atomics are non-blocking. Flush(target) and FlushAll wait
// for remote completion (the data is visible in the target's memory);
// origin buffers may be reused once the call returns for the direct-store
// path, and after a flush for the libfabric path (unless the provider
// injected them). Fence is FlushAll followed by a barrier.
//
// # Put with signal
//
// PutSignal writes data and then a 64-bit signal word; a rank observing the
// signal through WaitSignal or TestSignal is guaranteed to see the data. The
// libfabric path orders the two writes with FI_ORDER_WAW when the provider
// grants it, else with FI_FENCE, else by waiting for delivery completion of
// the data before writing the flag (see [SignalOrdering]).
package onesided
