// Package endpoint implements MPI-style communicators and endpoints over
// libfabric: a process may hold many ranks, and each rank (endpoint) owns
// a private libfabric endpoint, completion queue and address vector, so
// goroutines communicate concurrently without sharing locks or matching
// queues (the "MPI endpoints" design of Dinan et al.).
//
// # Communicators
//
// Init joins the job through package job, exchanges endpoint records
// and, when some peer is reached through libfabric, picks a provider with
// fabric.Select; World.Comm is the world communicator. Comm.Dup, Comm.Split and Comm.CreateEndpoints are
// collective and derive new communicators; each gets a context id agreed
// with an allgather of every member's free-id mask, so ids are unique among
// the live communicators of all members. Free releases a handle.
//
// CreateEndpoints(n) returns n handles to one new communicator whose ranks
// are numbered in parent-rank order. Each handle behaves as a separate
// rank: it has its own rank number, sends and receives as that rank, and
// takes part in collectives (Barrier, Allgather, Dup, Split) as that rank.
//
// # Threading model
//
// A private endpoint (the default for CreateEndpoints) lives in its own
// libfabric domain opened with FI_THREAD_DOMAIN, and all of its state
// (request table, probe queue, completion buffer) is touched only by the
// goroutine driving it: there is no lock on its hot path. A handle, the
// Requests it returns and the communicators derived from it (Dup, Split)
// must therefore be used by one goroutine at a time; hand a handle to
// another goroutine only with a happens-before edge (channel, WaitGroup).
// Progress is driven by the calls made on an endpoint (Wait, Test, Probe,
// the blocking calls): endpoints progress independently of each other, and
// an endpoint nobody calls makes no progress (providers here use manual
// data progress), so a rendezvous send completes only while its receiver's
// endpoint is being driven.
//
// One goroutine may drive several endpoints, for instance a sender and a
// receiver handle of the same process. Isend never waits for another
// endpoint: a send the provider refuses (a full queue towards the peer, or
// on shm a connection the receiving endpoint has not yet accepted) is
// retried a few times with progress on the sending endpoint and then queued
// in its request; later progress on that endpoint posts it, in order. WaitAll,
// WaitAny and WaitSome drive every endpoint their requests belong to, so waiting on
// the receives of one handle and the sends of another in one call cannot
// deadlock; Wait on a single request drives only that request's endpoint.
//
// The world communicator, and the handles of CreateEndpoints with
// Shared(true) (WEFT_ENDPOINT_SHARED=1), sit on an FI_THREAD_SAFE endpoint
// guarded by a mutex (or on k of them, with SharedEndpoints(k)): any
// goroutine may use them at any time, at the cost
// of every operation and every progress poll taking the lock and of one
// shared matching queue. The shared mode exists as the baseline the private
// design is measured against (docs/perf/endpoint.md).
//
// # Transports
//
// Ranks on the same node (by the node key in the bootstrap records) talk
// through weft's node transport: per-pair shared-memory rings of 64-byte
// cells carry small messages inline; larger ones are copied once, straight
// from the sender's buffer (or, up to the eager limit, from a staging copy
// made at send time) into the receiver's, with process_vm_readv between
// processes and copy() between endpoints of one process. Every other rank
// is reached through libfabric. Comm.Transport reports which one a peer
// uses; WEFT_NODE_TRANSPORT=fabric (WithNodeTransport(false)) puts every
// peer on libfabric. Both transports feed the same matching queues, and a
// pair always uses one of them, so everything below holds for both.
//
// # Messages
//
// Every message is an untagged libfabric message whose 64-bit remote CQ
// data is a match word: control bits, context id, destination slot, source
// rank and user tag (layout in tag.go). A provider that carries less than
// 8 bytes of CQ data (verbs;ofi_rxm: 4) gets the word as an 8-byte header
// in front of each message instead (match-header mode; WEFT_TUNE's
// epmatchhdr forces it on any provider, alike on every rank). Each endpoint matches messages itself
// against its own posted and unexpected queues: libfabric 1.17's shm provider
// ignores a tagged receive's ignore mask against messages that arrived before
// it, so AnySource/AnyTag could not be built on its tagged matching, and the
// per-endpoint queues are what the endpoints design is about. MPI's
// non-overtaking order per (source, tag, communicator) follows from
// FI_ORDER_SAS, which Init requires, and in-order completion processing.
// Messages up to the eager limit (WEFT_EAGER_LIMIT, default 16 KiB) land in
// registered bounce buffers (fi_injectdata when the provider's inject size
// allows, else fi_senddata from the pinned Go buffer) and cost one copy out.
// Larger messages use rendezvous: the sender registers its buffer and sends a
// 32-byte header (address, key, length, sequence); the matching receive reads
// the data straight into the user's buffer with fi_read and answers with a
// FIN that completes the send. Probe and Iprobe look at the unexpected queue.
//
// # Memory
//
// Buffers are plain Go slices ([]byte, or any Scalar slice through
// SendSlice/RecvSlice and friends). While an operation is in flight its Go
// memory is pinned with runtime.Pinner (and registered, for rendezvous);
// libfabric receives only integer handles as operation contexts. A
// buffer must not be touched until its request completes.
//
// # Errors and timeouts
//
// Blocking calls take a context.Context; Wait returns when it ends (the
// request stays in flight and can be cancelled). A peer that dies is seen
// as a Wait that times out, or as a send whose queue towards it stays full
// for WEFT_ENDPOINT_TIMEOUT (its request then completes with an error). Errors wrap the sentinels of this package and
// of fabric (ErrTruncated, ErrCanceled, ErrInvalid, ErrClosed, ...).
package endpoint
