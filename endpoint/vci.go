package endpoint

// The vci ("virtual communication interface", as MPICH calls it) is one
// libfabric endpoint with its CQ and AV plus this package's matching state:
// the posted-receive queue, the unexpected-message queue, the bounce
// buffers every incoming message lands in, the table of operations in
// flight and the rendezvous sends waiting for their FIN.
//
// Memory and pointer rules (cgo): libfabric never keeps a Go pointer.
// Operation contexts are integer handles (slot index, or bounceBit | bounce
// index). Bounce buffers are mmap memory from fabric.Domain.Alloc. Go
// buffers handed to libfabric for the duration of an operation (eager
// sends from user memory, rendezvous reads into user memory) are pinned
// with the request's runtime.Pinner from posting until the completion has
// been read; buffers a peer reads by rendezvous are registered
// (fabric.Domain.Register pins them) until the FIN arrives.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/internal/nodeseg"
	"github.com/weft-hpc/weft/internal/progress"
)

const bounceBit = uint64(1) << 41

// FIN payload status codes (receiver → sender).
const (
	finOK        = 0
	finTruncated = 1
	finFailed    = 2
)

// defaultBounces is the number of receive bounce buffers kept posted.
const defaultBounces = 32

type unexp struct {
	tag  uint64
	data []byte // eager payload, or the rendezvous header
	sig  uint32 // an inline node message's folded type signature (sigWord)
}

type vci struct {
	shared bool
	mu     sync.Mutex

	// partIDs: bit i set, partitioned sender id i is taken (partitioned.go).
	partIDs [partMaxIDs / 64]uint64

	info   *fabric.Info
	fab    *fabric.Fabric // owned when non-nil
	dom    *fabric.Domain
	ownDom bool
	cq     *fabric.CQ
	av     *fabric.AV
	ep     *fabric.Endpoint

	mrLocal     bool
	hdr         bool   // match word in a header in front of the payload (matchhdr.go)
	hdrBuf      []byte // an injected message with its header, built in place
	ctrlOut     []byte // a FIN or CTS, built in place: its own allocation, as a cgo call may not see memory holding Go pointers
	injectLimit int
	eagerLimit  int
	timeout     time.Duration

	bounce      *fabric.Buffer
	bounces     [][]byte
	bounceDesc  fabric.Desc
	repost      []int // consumed bounces, reposted by the next progress call
	repostSpare []int

	posted     rqueue   // user receives, in post order
	unexpected []unexp  // arrived, unmatched messages, in arrival order
	unexpBase  []unexp  // the backing array unexpected restarts from when empty
	smallFree  [][]byte // recycled payload buffers of small unexpected messages
	medFree    [][]byte // recycled buffers of unexpected medium messages (medBuf)
	medCap     int      // their capacity: the first medium slot size seen (0: none yet)
	rdvSends   map[uint64]*Request
	slots      []*Request // ops with a completion of their own
	free       []int32
	comps      [64]fabric.Completion
	seq        uint64
	deferFin   []*Request // FINs whose inject hit EAGAIN
	deferRead  []*Request // reads whose post hit EAGAIN
	sendq      []*Request // sends the provider refused, posted in order by progress
	flushTries uint64

	refs   int
	closed bool // released: no more operations
	// A private endpoint has no mutex: inside admits one goroutine at a
	// time between lock and unlock (its driver, or a World.Close from
	// elsewhere) at the cost of one compare-and-swap and one plain store,
	// and closing, once set by shutdown, makes new operations fail at
	// once. shutdown sets closing and waits for inside to be idle before
	// it touches anything, so that a driver never reads the endpoint's state
	// or libfabric objects while they are being closed. A call blocked
	// elsewhere in the process claims an idle endpoint through inside for
	// one progress call (pollForeign); a driver arriving meanwhile waits
	// for that call to end.
	inside  progress.Excl
	closing atomic.Bool
	src     *progress.Source // registered for foreign progress
	down    bool             // libfabric objects closed (later than closed when parked)
	log     hclog.Logger
	name    []byte

	// set is the communicator's endpoints in this process (peerset.go);
	// nil for the world's own endpoint.
	set   *vciSet
	setID int
	w     *World

	// freed is the world's bitmap of quarantined context ids
	// (World.ctxFreed): unexpected messages of those are dropped.
	freed *ctxBitmap

	// node transport (node.go): v's segment of rings, the peers' segments
	// it maps, one link per member of its node group (nil: not paired),
	// the FINs a full ring held back, and whether any peer of v's
	// communicators uses libfabric (else progress never reads the CQ).
	seg        *nodeseg.Seg
	segInfo    nodeInfo
	peerSegs   []*nodeseg.Seg
	links      []*nodeLink
	attachWant uint64
	nodeFins   []nodeFin
	noNet      bool
	crowded    bool       // more endpoints of its node group on this machine than cores: waits yield (request.go)
	solo       bool       // the only endpoint of its node group in this process: its peers are other processes
	stages     [][]byte   // staging buffers for reuse
	freeReqs   []*Request // released requests for reuse (Request.Release)
	chunk      []byte     // a typed receive's copy-then-unpack piece (node.go)
	scratch    []byte     // one inline message, packed or to unpack (node.go)
	// a node control message or rendezvous header just taken off a ring,
	// which incoming parses or copies before it returns (node.go)
	ctrlIn [rdvExtSize]byte

	// IsendBatch's rings with unpublished messages (batch.go)
	batchDirty []*nodeLink

	// registered segment buffers of eager and pipelined typed sends
	// (fabtyped.go), and the pipelined sends in progress
	segBuf     *fabric.Buffer
	segDesc    fabric.Desc
	devRings   map[*gpu.Device]*devRing    // GPU sends' segment rings (gputyped.go)
	devMaps    map[*gpu.Device]*gpu.Buffer // the bounce buffers mapped into each GPU (nil: cannot)
	devSegMaps map[*gpu.Device]*gpu.Buffer // the segment buffers mapped into each GPU (nil: cannot)
	devLands   map[*gpu.Device]*devLand    // pipelined GPU receives' landing areas (nil: none)
	devHooks   map[*gpu.Device]func()      // removes v's close hook of each device (gputyped.go)
	cpScratch  []byte                      // a fragment packed or copied before it is streamed into a copy slot (nodecopy.go)
	segSize    int                         // payload bytes of a segment buffer (behind the match header)
	pipeSize   int                         // payload bytes of a pipelined message's segment (≤ segSize)
	segs       [][]byte
	segFree    []int
	segFailed  bool
	pipes      []*Request
	sent       atomic.Pointer[sentStats] // what it sent, per peer, when counting (stats.go); nil until its first send
}

func (v *vci) lock() {
	if v.shared {
		v.mu.Lock()
		return
	}
	v.inside.Enter()
}

func (v *vci) unlock() {
	if v.shared {
		v.mu.Unlock()
		return
	}
	v.inside.Exit()
}

// pollForeign drives v's progress once for a call blocked elsewhere in
// the process (internal/progress), if nobody is using v; it never waits.
func (v *vci) pollForeign() {
	if v.shared {
		if !v.mu.TryLock() {
			return
		}
		defer v.mu.Unlock()
	} else {
		if !v.inside.TryForeign() {
			return
		}
		defer v.inside.EndForeign()
	}
	if !v.isClosed() {
		_ = v.progress()
	}
}

// isClosed reports, under lock, whether v takes no more operations. For a
// private endpoint closing is looked at first: once it is set, shutdown
// may be writing v's fields.
func (v *vci) isClosed() bool {
	return (!v.shared && v.closing.Load()) || v.closed
}

// drain makes new operations on a private endpoint fail and waits until
// no goroutine is inside one (a driver leaves within one progress call).
func (v *vci) drain() {
	if v.shared {
		return
	}
	v.closing.Store(true)
	for i := 0; v.inside.Busy(); i++ {
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// openVCI opens CQ, AV and endpoint in dom and posts the bounce buffers.
func openVCI(w *World, info *fabric.Info, dom *fabric.Domain, cfg *config, avCount int, shared bool) (*vci, error) {
	v := newVCI(w, cfg, shared)
	if err := v.attachFabric(info, dom, cfg, avCount); err != nil {
		progress.Unregister(v.src)
		return nil, err
	}
	return v, nil
}

// newVCI makes an endpoint with its matching state and no libfabric
// objects (a peer of the node transport only, until attachFabric).
func newVCI(w *World, cfg *config, shared bool) *vci {
	v := &vci{
		freed:      &w.ctxFreed,
		shared:     shared,
		eagerLimit: cfg.eagerLimit,
		timeout:    cfg.timeout,
		log:        w.log,
		refs:       1,
		rdvSends:   map[uint64]*Request{},
	}
	v.src = progress.Register(v.pollForeign)
	return v
}

// attachFabric opens v's CQ, AV and libfabric endpoint in dom and posts
// the bounce buffers; on error v has none of them.
func (v *vci) attachFabric(info *fabric.Info, dom *fabric.Domain, cfg *config, avCount int) error {
	v.lock() // v may be polled by foreign progress already
	defer v.unlock()
	v.info, v.dom = info, dom
	v.mrLocal = info.MRMode&fabric.MRLocal != 0
	v.hdr = matchHeader(info)
	v.injectLimit = info.InjectSize - v.hdrLen()
	if v.hdr {
		v.hdrBuf = make([]byte, max(info.InjectSize, matchHdrSize+8))
	}
	v.ctrlOut = make([]byte, matchHdrSize+16)
	if v.injectLimit > v.eagerLimit {
		v.injectLimit = v.eagerLimit
	}
	var err error
	fail := func(err error) error {
		v.closeFabric()
		v.cq, v.av, v.ep, v.bounce, v.bounces, v.name = nil, nil, nil, nil, nil, nil
		v.info, v.dom = nil, nil
		return err
	}
	if v.cq, err = dom.OpenCQ(cfg.cqSize); err != nil {
		return fail(fmt.Errorf("endpoint: open CQ: %w", err))
	}
	if v.av, err = dom.OpenAV(avCount); err != nil {
		return fail(fmt.Errorf("endpoint: open AV: %w", err))
	}
	for try := 0; ; try++ {
		v.ep, err = dom.OpenEndpoint(info, v.cq, v.av)
		// shm names its regions /dev/shm/<pid>:<n>:<m>; one left behind by a
		// dead process with our (reused) pid makes fi_enable fail with EBUSY.
		// The next endpoint of this process gets the next name: retry.
		if err == nil || !errors.Is(err, syscall.EBUSY) || try == 16 {
			break
		}
		v.log.Warn("endpoint name taken (stale shared-memory region of a dead process?); retrying", "err", err)
	}
	if err != nil {
		v.ep = nil
		return fail(fmt.Errorf("endpoint: open endpoint: %w", err))
	}
	if v.name, err = v.ep.Name(); err != nil {
		return fail(fmt.Errorf("endpoint: endpoint name: %w", err))
	}
	size := max(v.eagerLimit, rdvHeaderSize) + v.hdrLen()
	n := defaultBounces
	if v.bounce, err = dom.Alloc(n * size); err != nil {
		v.bounce = nil
		return fail(fmt.Errorf("endpoint: allocate %d bounce buffers of %d bytes: %w", n, size, err))
	}
	v.bounceDesc = v.bounce.Desc()
	all := v.bounce.Bytes()
	for i := 0; i < n; i++ {
		v.bounces = append(v.bounces, all[i*size:(i+1)*size:(i+1)*size])
		if err := v.postBounce(i); err != nil {
			return fail(fmt.Errorf("endpoint: post bounce buffer %d: %w", i, err))
		}
	}
	return nil
}

func (v *vci) postBounce(i int) error {
	return v.ep.Recv(v.bounces[i], v.bounceDesc, fabric.AddrUnspec, bounceBit|uint64(i))
}

func (v *vci) closeFabric() error {
	var errs []error
	if v.ep != nil {
		errs = append(errs, v.ep.Close())
	}
	if v.av != nil {
		errs = append(errs, v.av.Close())
	}
	if v.cq != nil {
		errs = append(errs, v.cq.Close())
	}
	errs = append(errs, v.closeDevRings()) // unmaps the bounce buffers from the GPUs first
	if v.bounce != nil {
		errs = append(errs, v.bounce.Close())
	}
	if v.segBuf != nil {
		errs = append(errs, v.segBuf.Close())
		v.segBuf, v.segs, v.segFree = nil, nil, nil
	}
	if v.ownDom && v.dom != nil {
		errs = append(errs, v.dom.Close())
	}
	if v.fab != nil {
		errs = append(errs, v.fab.Close())
	}
	return errors.Join(errs...)
}

// release drops one reference; the last one closes the fabric objects, or
// parks them while other endpoints of the same communicator in this
// process are open (peerset.go). Requests still in flight are abandoned
// (their pins are released when the objects close).
func (v *vci) release() error {
	v.lock()
	if v.isClosed() {
		v.unlock()
		return nil
	}
	v.refs--
	if v.refs > 0 {
		v.unlock()
		return nil
	}
	v.closed = true
	set := v.set
	v.unlock()
	if set == nil {
		return v.shutdown()
	}
	park, others := set.leave(v)
	if park {
		return nil
	}
	var errs []error
	var gone []*vci
	for _, o := range append(others, v) {
		o.lock()
		owes := o.owesPeers()
		o.unlock()
		if owes {
			// Its staged sends' receivers have not copied them yet: it
			// stays (unusable) until World.Close, which waits for them.
			continue
		}
		errs = append(errs, o.shutdown())
		gone = append(gone, o)
	}
	// Closed for good: the world no longer needs to close them.
	v.w.forget(gone)
	return errors.Join(errs...)
}

// shutdown closes v's libfabric objects and abandons its requests
// (idempotent). No goroutine may be inside an operation on v, nor on
// another endpoint of this process that may still reach v's.
func (v *vci) shutdown() error {
	progress.Unregister(v.src)
	v.drain()
	v.lock()
	defer v.unlock()
	v.closed = true
	if v.down {
		return nil
	}
	v.down = true
	err := errors.Join(v.closeFabric(), v.closeNode())
	for i, r := range v.slots {
		if r != nil {
			r.unpinAll()
			v.slots[i] = nil
		}
	}
	for _, r := range v.rdvSends {
		r.unpinAll()
	}
	v.rdvSends = nil
	for _, r := range v.sendq {
		r.unpinAll()
	}
	v.sendq = nil
	for r := v.posted.head; r != nil; {
		next := r.qnext
		r.qprev, r.qnext, r.listed = nil, nil, false
		r = next
	}
	v.posted = rqueue{}
	return err
}

// linger waits, before v closes for good, until v owes its peers
// nothing on the node transport: the receivers of its staged sends have
// copied them, and the FINs it holds back (a full ring) have gone out.
// A staged send completed when it was made (eager semantics, and every
// typed message the node transport packs), yet its receiver copies from
// a staging buffer in this process's memory when its receive matches: a
// process that closed and exited at once would fail that copy
// (process_vm_readv finds no process), and a buffer dropped with its
// endpoint could be reused under the copy. Sends to handles of this
// process need no wait: their receivers copy from Go memory that stays
// while referenced. It gives up on a peer whose process has exited, and
// at deadline. It drives v even after its handle was freed.
func (v *vci) linger(deadline time.Time) {
	for spins := 1; ; spins++ {
		v.lock()
		if v.down {
			v.unlock()
			return
		}
		_ = v.poll()
		owes := v.owesPeers()
		v.unlock()
		if !owes || time.Now().After(deadline) {
			return
		}
		idle(spins, true, v.solo)
	}
}

// owesPeers reports whether v has staged sends to live processes that
// their receivers have not yet copied, or FINs for live processes that it
// could not send yet. Caller holds the lock.
func (v *vci) owesPeers() bool {
	for _, f := range v.nodeFins {
		if !f.link.id.Exited() {
			return true
		}
	}
	for _, r := range v.rdvSends {
		if r.reqExt != nil && r.staged && r.link != nil && !r.link.local && r.peerErr() == nil {
			return true
		}
	}
	return false
}

func (v *vci) retain() {
	v.lock()
	v.refs++
	v.unlock()
}

// handle allocates a completion slot for r.
func (v *vci) handle(r *Request) uint64 {
	if r.slot == 0 {
		if n := len(v.free); n > 0 {
			r.slot = v.free[n-1]
			v.free = v.free[:n-1]
			v.slots[r.slot-1] = r
		} else {
			v.slots = append(v.slots, r)
			r.slot = int32(len(v.slots))
		}
	}
	return uint64(r.slot)
}

func (v *vci) freeSlot(r *Request) {
	if r.slot != 0 {
		v.slots[r.slot-1] = nil
		v.free = append(v.free, r.slot)
		r.slot = 0
	}
}

func (r *Request) pinBuf(b []byte) {
	if len(b) == 0 {
		return
	}
	x := r.ext()
	x.pin.Pin(&b[0])
	x.pinned = true
}

func (r *Request) unpinAll() {
	if r.reqExt == nil {
		return
	}
	if r.pinned {
		r.pin.Unpin()
		r.pinned = false
	}
	if r.mr != nil {
		r.mr.Close()
		r.mr = nil
	}
	for _, mr := range r.mrs {
		mr.Close()
	}
	r.mrs = r.mrs[:0] // the closed handles stay for regKeep
	if r.lkey != 0 {
		localDel(r.lkey)
		r.lkey = 0
	}
}

// finish marks r logically complete; it becomes done once no fabric op
// references it and no FIN is owed.
func (v *vci) finish(r *Request, err error) {
	if r.state == stDone {
		return
	}
	r.state = stDone
	if r.err == nil {
		r.err = err
	}
	if r.reqExt != nil && r.pipe != nil && r.pipe.ring != nil {
		r.pipe.drain() // kernels still running on the ring (gputyped.go)
	}
	if r.reqExt != nil && r.land != nil {
		r.landEnd() // unpack kernels still reading landing chunks (gputyped.go)
	}
	v.maybeRetire(r)
}

func (v *vci) maybeRetire(r *Request) {
	if r.state == stDone && r.reqExt == nil && r.slot == 0 { // an eager receive: nothing to let go of
		r.done = true
		return
	}
	if r.state == stDone && (r.reqExt == nil || r.pending == 0 && !r.finNeeded) {
		r.unpinAll()
		v.freeSlot(r)
		r.done = true
		if r.reqExt != nil && r.unpack != nil {
			r.unpackTyped(r.unpack)
			r.unpack = nil
		}
		if r.reqExt != nil && r.staged && r.link != nil && r.err != nil {
			v.log.Warn("eager send failed after it completed", "to", r.qrank, "err", r.err)
		}
		v.releaseStaging(r)
	}
}

// releaseStaging takes back the segment or staging buffer send r was
// sent from, if any.
func (v *vci) releaseStaging(r *Request) {
	if r.reqExt == nil {
		return
	}
	if r.segIdx != 0 {
		if v.segBuf != nil {
			v.segFree = append(v.segFree, r.segIdx-1)
		}
		r.segIdx = 0
	}
	if r.staged {
		r.staged = false
		v.unstage(r.buf)
		r.buf = nil
	}
}

// sendTries is how many times a send the provider refuses (EAGAIN) is
// retried, with progress on its own endpoint in between, before Isend queues
// it in its request instead. A full queue towards a peer often drains within
// a few polls; one that does not may need an endpoint only the caller can
// drive (its receiver in the same goroutine), so Isend must not spin on it.
const sendTries = 32

// tryPost runs post until it stops returning ErrAgain, driving this
// endpoint's progress in between, at most sendTries times; it returns the
// last error (ErrAgain when the provider still refuses). Caller holds the
// lock and v.sendq is empty.
func (v *vci) tryPost(post func() error) error {
	for i := 0; ; i++ {
		err := post()
		if err == nil || !errors.Is(err, fabric.ErrAgain) || i == sendTries {
			return err
		}
		if perr := v.progress(); perr != nil {
			return perr
		}
	}
}

// submit posts send r now if it can (retrying briefly), else queues it;
// an error means r was neither posted nor queued.
func (v *vci) submit(r *Request) error {
	if len(v.sendq) == 0 {
		err := v.tryPost(func() error { return v.postSend(r) })
		if err == nil || !errors.Is(err, fabric.ErrAgain) {
			return err
		}
	}
	v.enqueue(r)
	return nil
}

// enqueue appends send r to the queue progress posts from, in order.
func (v *vci) enqueue(r *Request) {
	r.queued = time.Now()
	v.sendq = append(v.sendq, r)
}

// postSend hands send r (eager data or a rendezvous header) to the provider.
func (v *vci) postSend(r *Request) error {
	if r.link != nil {
		return v.postNode(r)
	}
	if r.qinject {
		if err := v.injectFramed(r.qdata, r.qtag, r.qdest); err != nil {
			return err
		}
		if r.kind == kSendEager {
			v.finish(r, nil)
		} // a rendezvous send completes on its FIN
		return nil
	}
	if err := v.sendFramed(r.qdata, r.qdesc, r.qtag, r.qdest, v.handle(r)); err != nil {
		return err
	}
	r.pending++
	return nil
}

// flushSends posts queued sends in order until the provider refuses one.
// A send that stays refused for the endpoint timeout fails (a peer that
// is gone on tcp;ofi_rxm). Caller holds the lock.
func (v *vci) flushSends() {
	n := 0
	for n < len(v.sendq) {
		r := v.sendq[n]
		err := v.postSend(r)
		if errors.Is(err, fabric.ErrAgain) {
			v.flushTries++
			if v.flushTries&63 != 0 || time.Since(r.queued) < v.timeout {
				break
			}
			err = fmt.Errorf("queue stayed full for %v: %w", v.timeout, err)
		}
		n++
		if err != nil {
			if r.kind == kSendRdv {
				delete(v.rdvSends, r.seq)
			}
			v.finish(r, fmt.Errorf("endpoint: send to rank %d: %w", r.qrank, err))
		}
	}
	if n > 0 {
		rest := copy(v.sendq, v.sendq[n:])
		clear(v.sendq[rest:])
		v.sendq = v.sendq[:rest]
	}
}

// progress reads completions and retries deferred work. Caller holds the lock.
func (v *vci) progress() error {
	if v.isClosed() {
		return fmt.Errorf("endpoint: progress: %w", ErrClosed)
	}
	return v.poll()
}

// poll is progress without the check that v is open: linger drives
// endpoints whose handles were freed but which still owe their peers.
func (v *vci) poll() error {
	if len(v.repost) > 0 {
		rp := v.repost
		v.repost = v.repostSpare[:0]
		for _, i := range rp {
			v.repostBounce(i) // EAGAIN puts it back on v.repost
		}
		v.repostSpare = rp[:0]
	}
	if v.links != nil {
		v.pollNode()
	}
	for !v.noNet && v.cq != nil {
		n, err := v.cq.Read(v.comps[:])
		for i := 0; i < n; i++ {
			v.complete(&v.comps[i])
		}
		if err != nil {
			var ce *fabric.CQError
			if errors.As(err, &ce) {
				v.completeError(ce)
				continue
			}
			if errors.Is(err, fabric.ErrAgain) {
				break
			}
			return fmt.Errorf("endpoint: read CQ: %w", err)
		}
		if n < len(v.comps) {
			break
		}
	}
	if len(v.deferFin)+len(v.deferRead) > 0 {
		v.runDeferred()
	}
	if len(v.nodeFins) > 0 {
		v.retryNodeFins()
	}
	if len(v.sendq) > 0 {
		v.flushSends()
	}
	if len(v.pipes) > 0 {
		v.pumpAll()
	}
	return nil
}

func (v *vci) complete(c *fabric.Completion) {
	if c.Context&bounceBit != 0 {
		i := int(c.Context &^ bounceBit)
		if i < len(v.bounces) {
			if v.hdr {
				v.incomingHdr(v.bounces[i][:c.Len])
			} else {
				v.incoming(c.Data, v.bounces[i][:c.Len])
			}
			// Reposted at the start of the next progress call: off the
			// critical path between a receive and the caller's reply.
			v.repost = append(v.repost, i)
		}
		return
	}
	idx := int(c.Context & ctxSlotMask)
	if idx <= 0 || idx > len(v.slots) || v.slots[idx-1] == nil {
		v.log.Warn("completion for unknown context", "context", c.Context)
		return
	}
	r := v.slots[idx-1]
	r.pending--
	switch {
	case c.Context&segBit != 0:
		v.segDone(r, c.Context, nil)
	case r.state == stReading && r.rd != nil:
		v.readStep(r)
	case r.state == stReading:
		v.readDone(r, nil)
	case r.kind == kSendEager:
		v.finish(r, nil)
	default: // rendezvous header sent from memory; the FIN finishes the send
		v.maybeRetire(r)
	}
}

func (v *vci) repostBounce(i int) {
	if v.isClosed() {
		return
	}
	if err := v.postBounce(i); err != nil {
		if !errors.Is(err, fabric.ErrAgain) {
			v.log.Error("repost bounce buffer", "err", err)
		}
		v.repost = append(v.repost, i)
	}
}

func (v *vci) completeError(ce *fabric.CQError) {
	if ce.Context&bounceBit != 0 {
		i := int(ce.Context &^ bounceBit)
		if errors.Is(ce.Err, fabric.ErrCanceled) {
			return // endpoint closing
		}
		// A message larger than the bounce buffer: the sender's eager limit
		// is larger than ours. The message is lost; say so loudly.
		v.log.Error("incoming message lost (is WEFT_EAGER_LIMIT the same on every rank?)", "err", ce, "olen", ce.Olen)
		if i < len(v.bounces) {
			v.repostBounce(i)
		}
		return
	}
	idx := int(ce.Context & ctxSlotMask)
	if idx <= 0 || idx > len(v.slots) || v.slots[idx-1] == nil {
		v.log.Warn("error completion for unknown context", "context", ce.Context, "err", ce.Err)
		return
	}
	r := v.slots[idx-1]
	r.pending--
	if ce.Context&segBit != 0 {
		v.segDone(r, ce.Context, ce)
		return
	}
	if r.state == stReading && r.rd != nil {
		if r.rd.err == nil {
			r.rd.err = ce
		}
		v.readStep(r)
		return
	}
	if r.state == stReading {
		v.readDone(r, ce)
		return
	}
	if r.kind == kSendRdv {
		delete(v.rdvSends, r.seq)
	}
	v.finish(r, fmt.Errorf("endpoint: %s: %w", r.describe(), ce))
}

// incoming handles one arrived message: a FIN, or a message for the first
// matching posted receive, or a new unexpected entry.
func (v *vci) incoming(t uint64, payload []byte) {
	if tagIsCtrl(t) {
		if tagIsRTS(t) {
			v.pipeCtrl(t, payload)
			return
		}
		r := v.rdvSends[ctrlSeq(t)]
		if r == nil {
			v.log.Warn("FIN for unknown rendezvous", "seq", ctrlSeq(t))
			return
		}
		delete(v.rdvSends, r.seq)
		var err error
		if len(payload) < 8 || binary.LittleEndian.Uint64(payload) == finFailed {
			err = fmt.Errorf("endpoint: rendezvous send: the receiver failed to read the data")
		} else if x := r.reqExt; x != nil && x.link != nil && !x.timed.IsZero() {
			v.learnWay(x.link, waySingle, len(r.buf), time.Since(x.timed))
		}
		v.finish(r, err) // truncation is reported at the receiver only (MPI)
		return
	}
	for r := v.posted.head; r != nil; r = r.qnext {
		if tagMatches(t, r.want, r.ignore) {
			v.posted.remove(r)
			v.deliver(r, t, payload)
			return
		}
	}
	v.pushUnexpected(t, payload)
}

// smallPayload is the largest unexpected payload whose buffer is
// recycled; maxSmallFree bounds the buffers kept.
const (
	smallPayload = 256
	maxSmallFree = 256
	// maxMedFree bounds the medium buffers kept (medBuf): 64 of 16 KiB
	// slots are 1 MiB.
	maxMedFree = 64
)

// pushUnexpected queues a copy of payload as an unexpected message.
func (v *vci) pushUnexpected(t uint64, payload []byte) {
	b := v.smallBuf(len(payload))
	copy(b, payload)
	v.appendUnexpected(unexp{tag: t, data: b})
}

// appendUnexpected queues u. When the queue's array is full it moves to
// a larger one, which unexpBase then names: an emptied queue starts again
// at its beginning, so a steady stream of unexpected messages allocates
// no array.
func (v *vci) appendUnexpected(u unexp) {
	if !tagIsCtrl(u.tag) && v.freed.has(int(tagCtx(u.tag))/ctxPerID) {
		v.recycle(u.data) // a late message of a freed communicator
		return
	}
	if len(v.unexpected) == cap(v.unexpected) {
		q := make([]unexp, len(v.unexpected), max(2*cap(v.unexpected), 16))
		copy(q, v.unexpected)
		v.unexpected, v.unexpBase = q, q[:0]
	}
	v.unexpected = append(v.unexpected, u)
}

// smallBuf returns a buffer of n bytes for an unexpected payload: a
// recycled one for small payloads.
func (v *vci) smallBuf(n int) []byte {
	if n <= smallPayload {
		if k := len(v.smallFree); k > 0 {
			b := v.smallFree[k-1]
			v.smallFree = v.smallFree[:k-1]
			return b[:n]
		}
		return make([]byte, n, smallPayload)
	}
	return make([]byte, n)
}

// medBuf returns a buffer of n bytes for an unexpected medium message
// of a slot of size bytes: a recycled one when size is the size they
// have (medCap, set by the first), else a new one. A window of
// medium messages that arrive before their receives (a ring
// Allgather's) then allocates nothing.
func (v *vci) medBuf(n, size int) []byte {
	if v.medCap == 0 {
		v.medCap = size
	}
	if size == v.medCap {
		if k := len(v.medFree); k > 0 {
			b := v.medFree[k-1]
			v.medFree = v.medFree[:k-1]
			return b[:n]
		}
		return make([]byte, n, size)
	}
	return v.smallBuf(n)
}

// recycle takes back the payload buffer of a consumed unexpected message.
func (v *vci) recycle(b []byte) {
	switch c := cap(b); {
	case c == smallPayload && len(v.smallFree) < maxSmallFree:
		v.smallFree = append(v.smallFree, b)
	case c == v.medCap && c > smallPayload && len(v.medFree) < maxMedFree:
		v.medFree = append(v.medFree, b)
	}
}

// dropContext discards the unexpected messages of a communicator's match
// contexts, ctx and the ctxPerID-1 after it (a communicator freed with
// messages nobody received).
func (v *vci) dropContext(ctx uint16) {
	v.lock()
	defer v.unlock()
	n := 0
	for _, u := range v.unexpected {
		if c := tagCtx(u.tag); !tagIsCtrl(u.tag) && c >= ctx && c < ctx+ctxPerID {
			v.recycle(u.data)
			continue
		}
		v.unexpected[n] = u
		n++
	}
	clear(v.unexpected[n:])
	v.unexpected = v.unexpected[:n]
}

// takeUnexpected removes and returns the oldest unexpected message that
// matches (want, ignore).
func (v *vci) takeUnexpected(want, ignore uint64) (unexp, bool) {
	for i, u := range v.unexpected {
		if tagMatches(u.tag, want, ignore) {
			if i == 0 { // the usual case (arrival order): no shifting
				v.unexpected[0] = unexp{}
				v.unexpected = v.unexpected[1:]
				if len(v.unexpected) == 0 {
					v.unexpected = v.unexpBase[:0] // reuse the array from its start
				}
				return u, true
			}
			copy(v.unexpected[i:], v.unexpected[i+1:])
			v.unexpected[len(v.unexpected)-1] = unexp{}
			v.unexpected = v.unexpected[:len(v.unexpected)-1]
			return u, true
		}
	}
	return unexp{}, false
}

func (v *vci) peekUnexpected(want, ignore uint64) (unexp, bool) {
	for _, u := range v.unexpected {
		if tagMatches(u.tag, want, ignore) {
			return u, true
		}
	}
	return unexp{}, false
}

// deliver completes receive r with a matched message (or starts its
// rendezvous read).
func (v *vci) deliver(r *Request, t uint64, payload []byte) {
	if tagIsRTS(t) {
		if l := r.c.link(tagSource(t)); l != nil {
			h := parseHeader(payload)
			v.nodeRead(r, l, t, h, checkSignature(r, headerSig(payload), h.size))
			return
		}
		h := parseHeader(payload)
		switch ext := headerExt(payload); ext & 0xff {
		case modeInline:
			v.deliverInline(r, t, h, payload)
		case modePipe:
			v.startPipeRecv(r, t, h, checkSignature(r, headerSig(payload), h.size))
		default:
			v.startRead(r, t, h, ext, checkSignature(r, headerSig(payload), h.size))
		}
		return
	}
	r.take(0, payload)
	c := r.capacity()
	r.st = Status{Source: tagSource(t), Tag: tagUser(t), Count: min(len(payload), c)}
	var err error
	if len(payload) > c {
		err = fmt.Errorf("endpoint: message of %d bytes from rank %d into %d: %w", len(payload), r.st.Source, c, ErrTruncated)
	}
	v.finish(r, err)
}

func statusOf(u unexp) Status {
	st := Status{Source: tagSource(u.tag), Tag: tagUser(u.tag), Count: len(u.data)}
	if tagIsRTS(u.tag) {
		st.Count = int(parseHeader(u.data).size)
	}
	return st
}

type rdvHeader struct {
	addr, key, size, seq uint64
}

func (h rdvHeader) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], h.addr)
	binary.LittleEndian.PutUint64(b[8:], h.key)
	binary.LittleEndian.PutUint64(b[16:], h.size)
	binary.LittleEndian.PutUint64(b[24:], h.seq)
}

func parseHeader(b []byte) rdvHeader {
	if len(b) < rdvHeaderSize {
		return rdvHeader{}
	}
	return rdvHeader{
		addr: binary.LittleEndian.Uint64(b[0:]),
		key:  binary.LittleEndian.Uint64(b[8:]),
		size: binary.LittleEndian.Uint64(b[16:]),
		seq:  binary.LittleEndian.Uint64(b[24:]),
	}
}

// startRead begins the rendezvous read for receive r: the data goes
// straight from the sender's registered buffer into r.buf.
// A receive whose type signature does not match (reject) reads nothing,
// sends the FIN and completes with that error.
func (v *vci) startRead(r *Request, t uint64, h rdvHeader, ext uint64, reject error) {
	src := tagSource(t)
	r.st = Status{Source: src, Tag: tagUser(t)}
	if src >= len(r.c.addrs) {
		v.finish(r, fmt.Errorf("endpoint: rendezvous from unknown rank %d", src))
		return
	}
	c := r.capacity()
	n := int(min(uint64(c), h.size))
	r.st.Count = n
	r.ext()
	r.finNeeded = true
	r.finSeq = h.seq
	r.finDest = r.c.addrs[src]
	r.finStatus = finOK
	if uint64(c) < h.size {
		r.finStatus = finTruncated
	}
	r.state = stReading
	if reject != nil {
		r.st.Count = 0
		r.finStatus = finOK
		r.err = reject
		v.readDone(r, nil)
		return
	}
	if n == 0 {
		v.readDone(r, nil)
		return
	}
	v.planReads(r, h, ext, n)
}

// readDone ends the receive side of a rendezvous: FIN to the sender, then
// completion of the user request.
func (v *vci) readDone(r *Request, err error) {
	r.state = stDone
	if err != nil {
		r.finStatus = finFailed
		r.err = fmt.Errorf("endpoint: rendezvous read from rank %d: %w", r.st.Source, err)
	} else if r.finStatus == finTruncated {
		r.err = fmt.Errorf("endpoint: rendezvous message from rank %d into %d bytes: %w", r.st.Source, r.capacity(), ErrTruncated)
	}
	if ferr := v.sendFin(r); ferr != nil {
		if errors.Is(ferr, fabric.ErrAgain) {
			v.deferFin = append(v.deferFin, r)
			return
		}
		r.finNeeded = false
		if r.err == nil {
			r.err = fmt.Errorf("endpoint: rendezvous FIN to rank %d: %w", r.st.Source, ferr)
		}
	}
	v.maybeRetire(r)
}

func (v *vci) sendFin(r *Request) error {
	if r.cts {
		return v.sendCTS(r)
	}
	b := v.ctrlFrame(v.ctrlOut[:matchHdrSize+8]) // (injected: copied before the call returns)
	binary.LittleEndian.PutUint64(b[v.hdrLen():], r.finStatus)
	if err := v.injectFramed(b, ctrlTag(r.finSeq), r.finDest); err != nil {
		return err
	}
	r.finNeeded = false
	return nil
}

func (v *vci) runDeferred() {
	if len(v.deferRead) > 0 {
		rs := v.deferRead
		v.deferRead = nil
		for _, r := range rs {
			r.rd.deferred = false
			v.readStep(r)
		}
	}
	if len(v.deferFin) > 0 {
		fs := v.deferFin
		v.deferFin = nil
		for _, r := range fs {
			if err := v.sendFin(r); err != nil {
				if errors.Is(err, fabric.ErrAgain) {
					v.deferFin = append(v.deferFin, r)
					continue
				}
				r.finNeeded = false
				if r.err == nil {
					r.err = fmt.Errorf("endpoint: rendezvous FIN: %w", err)
				}
			}
			v.maybeRetire(r)
		}
	}
}

// cancel removes an unmatched receive from the posted queue.
// errRecvCanceled ends a cancelled receive (one value: cancelling many,
// as a partitioned receive does every round, allocates nothing).
var errRecvCanceled = fmt.Errorf("endpoint: receive: %w", ErrCanceled)

func (v *vci) cancel(r *Request) error {
	switch r.kind {
	case kSendEager, kSendRdv:
		return fmt.Errorf("endpoint: cancel of a send: %w", ErrNotSupported)
	}
	if r.state != stPosted {
		return nil // matched already: completes normally
	}
	if r.listed {
		v.posted.remove(r)
		r.st = Status{Source: AnySource, Tag: AnyTag, Canceled: true}
		v.finish(r, errRecvCanceled)
	}
	return nil
}

// rqueue is the posted-receive queue: a doubly linked list through the
// requests, so that a match anywhere in it is removed in O(1) (the scan to
// find it is the matching cost the endpoints design is about; shifting a
// slice on every match added a cost proportional to the queue length).
type rqueue struct{ head, tail *Request }

func (q *rqueue) push(r *Request) {
	r.qprev, r.qnext, r.listed = q.tail, nil, true
	if q.tail != nil {
		q.tail.qnext = r
	} else {
		q.head = r
	}
	q.tail = r
}

func (q *rqueue) remove(r *Request) {
	if r.qprev != nil {
		r.qprev.qnext = r.qnext
	} else {
		q.head = r.qnext
	}
	if r.qnext != nil {
		r.qnext.qprev = r.qprev
	} else {
		q.tail = r.qprev
	}
	r.qprev, r.qnext, r.listed = nil, nil, false
}
