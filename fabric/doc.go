// Package fabric is weft's safe Go binding of libfabric (1.17): provider
// discovery (GetInfo, Select), fabrics, domains, completion queues, address
// vectors, endpoints, memory regions, counters, and the data-transfer
// operations (messages, tagged messages, RMA, atomics). It is the only
// package in weft that uses cgo over libfabric.
//
// # Loading libfabric
//
// The package does not link libfabric: the first GetInfo, Select or
// OpenFabric in a process loads libfabric.so.1 (Loaded reports whether it
// has), so a program that never calls them does not pay the library's
// start-up cost (≈ 0.2 s with Debian 12's build, in its dependencies'
// constructors). When the library cannot be loaded those calls fail with
// an error wrapping ErrNotSupported. Building still needs libfabric's
// headers.
//
// # Objects and lifetimes
//
// Every libfabric object has its own Go type with an idempotent Close. A
// parent closes its children first: Fabric.Close closes its domains, and
// Domain.Close closes endpoints, then memory regions and buffers, then CQs,
// AVs and counters. Operations on a closed object return errors matching
// ErrClosed. LiveObjects reports what is still open, so tests can assert
// that nothing leaked.
//
// # Hot path and the cgo rules
//
// Each data-transfer operation (Send, TSend, Write, Atomic, ...) and each
// CQ.Read is exactly one cgo call into a small C shim. Operation contexts
// are integers chosen by the caller and returned in the Completion; C never
// receives or keeps a Go pointer beyond the call, except buffers that the
// caller keeps valid until completion: memory from Domain.Alloc (mmap, off
// the Go heap), memory registered with Domain.Register (pinned with
// runtime.Pinner until deregistered), or Go memory the caller pinned. CQ.Read
// fills the caller's []Completion in C and returns a batch.
//
// Endpoint.PostBatch posts several operations in one call; CQ.WaitWord
// polls a memory word while reading the CQ, in C; CQ.ReadSignals and
// CQ.WaitWordSignals also store put-with-signal flags that peers send in
// remote CQ data (EncodeSignal) into a SignalSink's memory, in the same call.
//
// # Polling
//
// A goroutine that busy-polls (CQ.Read, CQ.ReadSpin, CQ.WaitWord,
// Endpoint.PostAndRead in a loop) spends nearly all its time inside C and
// never passes through the Go scheduler. After 10 ms of that the runtime's
// monitor thread takes its processor (P) away at every tick, waking a thread
// that finds nothing to do, and the poller must get a P back on each return
// from C: on a 2-vCPU machine this doubled the 8-byte shm ping-pong latency.
// These calls therefore yield (runtime.Gosched) once per poll-yield
// interval of the domain (WithPollYield; 1 ms by default, WEFT_TUNE
// pollyield), which starts a new
// scheduling slice and keeps the P where it is. The check costs one atomic
// add per call and a clock read every 64 calls. Fast calls (below) do not
// count: to the scheduler they are Go code, which it preempts by itself
// every 10 ms without taking the P away.
//
// Inside C, the spinning loops pace their polls: after a poll that found
// nothing they read the monotonic clock once (the domain's WithPollPace;
// WEFT_TUNE pollpace) before polling again. On shm a poll takes locks in shared memory that the
// peer needs to deliver the awaited message; back-to-back polls slowed the
// 8-byte ping-pong by ~8% when the two processes ran on nearby cores.
//
// # Fast calls
//
// The same calls, plus Endpoint.PostBatch and the single-operation methods
// (Send, Recv, Inject, TSend, Write, Read, ...), skip the cgo transition on
// providers whose hot paths never block in the kernel (shm): each CQ and
// endpoint owns a guarded C stack, and a call that finds it free runs the
// C shim there through a small assembly trampoline (internal/ccall), the
// goroutine keeping its P. That saves ~30 ns per call, a tenth of an
// 8-byte shm message. It applies to calls of at most FastSpinMax polling
// rounds (a garbage-collection pause waits for a call in flight), to one
// goroutine per CQ or endpoint at a time (a concurrent call takes cgo), and
// to operations whose every buffer lies in a live registration of the
// domain (Domain.Alloc, Domain.Register), since no cgo pointer check runs
// there; other operations take cgo and its check. WithFastCall chooses per
// domain (auto, on, off); off restores plain cgo for the domain's objects.
//
// Each domain keeps its fast-call mode, poll pace and poll yield
// (DomainOption); its CQs, counters and endpoints take them when they open.
// Options left out take the process-wide defaults of the moment the domain
// opens: WEFT_FASTCALL and WEFT_TUNE's pollpace and pollyield, or what
// SetFastCall, SetPollPace and SetPollYield last set.
//
// # Errors
//
// Failed calls return *Error (operation, errno, libfabric text); error
// completions return *CQError (context, generic error, provider errno and
// fi_cq_strerror text). Both match the sentinels (ErrAgain, ErrTruncated,
// ErrCanceled, ErrClosed, ErrNotSupported, ErrNoProvider, ErrInvalid,
// ErrAddrNotAvail) with errors.Is. ErrAgain means "read the CQ, then retry":
// it is preallocated per operation, so retry loops do not allocate.
//
// # Provider quirks (libfabric 1.17, checked with fi_info and the tests)
//
//   - shm grants only SAS ordering unless the hints ask for another ordering
//     bit; with one it grants every ordering (GetInfo adds FI_ORDER_RMA_WAW
//     when any non-SAS bit is asked for). With ordering hints shm also
//     reports no FI_MR_VIRT_ADDR, so remote addresses are offsets into the
//     registration: always use MR.RemoteAddr.
//   - ofi_rxm grants atomics only when CapAtomic is hinted, and then grants
//     no RAW/WAW/SAW/RAR message ordering; a hint that asks for it matches
//     nothing, so GetInfo retries without ordering hints and records a note
//     in Info.Notes. Check Info.MsgOrder before relying on ordering.
//   - an inject larger than InjectSize gets EAGAIN forever from ofi_rxm and
//     is accepted by shm: every inject variant refuses it with ErrInvalid.
//   - tcp alone is MSG-only: an RDM request for "tcp" becomes "tcp;ofi_rxm".
//   - sockets works but degrades badly when CPUs are oversubscribed; Select
//     never picks it automatically.
//   - FI_REMOTE_CQ_DATA is an operation flag, not a capability: hinting
//     CapRemoteCQData keeps only providers with CQDataSize > 0.
//   - shm (and sockets) report error completions with a negative error code;
//     CQError normalises it. shm and ofi_rxm leave CQError.Olen at 0 on
//     truncation.
//   - shm: a tagged receive with a non-zero ignore mask never matches a
//     message that is already in the unexpected queue
//     (QuirkUnexpectedIgnoreMask). Info.Quirks lists such known deviations.
//   - shm and ofi_rxm have manual data progress: reading the CQ (of both
//     sides, in a one-process test) is what moves data.
//
// # Environment
//
// WEFT_PROVIDER overrides Select's automatic choice; WEFT_FASTCALL sets the
// initial default fast-call mode (SetFastCall); WEFT_LOG_LEVEL sets the log level
// (internal/wlog). Tuning knobs are keys of WEFT_TUNE (docs/tuning.md):
// mrcache (unreferenced registrations a domain keeps, default 64),
// hugepages=0 (no huge pages in Alloc), pollyield and pollpace (the initial
// defaults of WithPollYield and WithPollPace), shmsweep. A bad value of any of them, or of
// WEFT_TUNE, makes GetInfo and Select fail with ErrInvalid.
package fabric
