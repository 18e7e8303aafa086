// Package ccall calls a C function on a stack the caller provides, without
// the Go scheduler's cgo transition.
//
// A cgo call tells the scheduler that the goroutine is leaving Go
// (entersyscall), switches to the thread's system stack, checks pointer
// arguments and, on the way back, reacquires a processor (exitsyscall).
// That costs tens of nanoseconds, which is a large share of a libfabric
// operation on the shared-memory provider. Call does none of it: it
// switches the stack pointer to the given C stack, calls fn(arg) under the
// System V AMD64 ABI and switches back. For the scheduler and the garbage
// collector the goroutine simply keeps running Go code until Call returns.
//
// That is only correct for C functions that
//
//   - return soon (a stop-the-world pause or a preemption request waits for
//     them: bound the work, e.g. the number of polling rounds),
//   - do not block (the goroutine keeps its processor while in C),
//   - never call back into Go,
//   - fit in the stack they are given (put a guard page below it), and
//   - keep no Go pointer after they return; Go memory they read or write
//     through arg must stay reachable (runtime.KeepAlive) until Call
//     returns. It does not move during the call: the goroutine is not
//     preempted, so its stack is neither grown nor shrunk, and the heap does
//     not move.
//
// Only one call at a time may use a given stack. Package fabric owns the
// only callers: it gives every completion queue and endpoint its own stack,
// guarded by an atomic flag, and falls back to cgo when the flag is taken.
//
// Supported is false on architectures without the trampoline; Call must
// not be used there.
package ccall
