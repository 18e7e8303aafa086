package endpoint

// The node transport: point-to-point between endpoints of one node without
// libfabric.
//
// Every endpoint (vci) that takes part owns one shared-memory segment
// (internal/nodeseg) holding one single-producer single-consumer ring
// (internal/shmring) per endpoint of its node group, itself included: ring
// i carries the messages that member i sends to the owner. The owner
// consumes its rings; each sender produces into its ring in every peer's
// segment. A ring has one producer and one consumer, each driven by its
// endpoint's driver (or under the lock of a shared endpoint), so nothing on
// this path takes a lock or makes a system call.
//
// Messages below medFirst, and those up to the ring's inline limit when
// the pair's medium slots are busy, travel in the cells, their match word
// (tag.go) as the cell's user word; the receiver matches on the word
// before it copies, so a matched message is copied once, from the cells
// into the user's buffer. Medium messages, from medFirst up to WEFT_TUNE's
// nodemedium, are copied by the sender into a per-pair slot next to the
// ring and by the receiver out of it, one contiguous copy each, with a
// 16-byte header through the ring (nodemed.go): a 4 KiB half round trip
// 1.8 µs against 11.4 through the staged process_vm_readv and MPICH's
// 1.4–1.5 in one run of the loaded 2-vCPU VM (docs/perf/endpoint.md).
// With WEFT_TUNE's nodecopy set, messages from that size on to another
// process are copied in and out of a per-pair copy area a slot at a time,
// the two copies overlapping (nodecopy.go).
// Larger messages, and medium ones when every slot of the pair is busy,
// use rendezvous: the sender puts
// a 32-byte header (address, size, sequence) in the ring; the matching
// receive copies the data straight out of the sender's buffer, with
// process_vm_readv (internal/cma) from another process or with copy()
// from an endpoint of the same process, then answers with a FIN through
// its own ring towards the sender. Matching, ordering, probes, cancels and
// truncation are the ones of the libfabric path: both feed the same
// per-endpoint queues (vci.go), and a pair of endpoints uses one transport
// for everything, so MPI's per-pair order holds.
//
// A pair uses the node transport when both endpoints have it on
// (WEFT_NODE_TRANSPORT, WithNodeTransport), share the node (same node key
// in the bootstrap records, internal/nodeseg.NodeKey), and either live in
// one process or may read each other's memory with cross-memory attach
// (same pid namespace, CMA allowed by the kernel's ptrace policy). The
// decision is computed by every rank from the same published records, so
// both ends agree; other pairs keep libfabric.
//
// A segment's file is unlinked as soon as every peer has mapped it (each
// peer counts itself in the segment header), at the latest when the
// endpoint closes; nodeseg.Sweep removes the files of processes that died
// before that.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/choose"
	"github.com/weft-hpc/weft/internal/cma"
	"github.com/weft-hpc/weft/internal/nodeseg"
	"github.com/weft-hpc/weft/internal/peerwatch"
	"github.com/weft-hpc/weft/internal/shmring"
	"github.com/weft-hpc/weft/internal/wait"
)

// Segment header (one cache line, then the rings).
const (
	nodeMagic   = 0x65646f6e74666577 // "weftnode"
	nodeHdr     = 64
	offAttached = 8 // uint64: peers that mapped the segment
	// offPipe: uint64, how far the owner has packed its current pipelined
	// typed send (pipeWord); only the owner writes it.
	offPipe = 16
)

// nodeBurst bounds the messages taken from one ring per progress call, so
// that one busy sender does not starve the others.
const nodeBurst = 64

// nodeLink is one endpoint's connection to a member of its node group.
type nodeLink struct {
	out    *shmring.Producer // our ring in the peer's segment
	in     *shmring.Consumer // the peer's ring in our segment
	inline int               // out's inline limit
	pid    int               // the peer's process, for CMA
	local  bool              // same process: rendezvous by copy()
	member int
	medOut *medArea // our slot area in the peer's segment (nil: none)
	medIn  *medArea // the peer's slot area in our segment (nil: none)
	cpOut  *medArea // our copy area in the peer's segment (nodecopy.go; nil: none)
	cpIn   *medArea // the peer's copy area in our segment (nil: none)
	// peerHdr is the header of the peer's segment (its pipeline word).
	peerHdr []byte
	id      peerwatch.Ident // the peer's process
	cout    *copyOut        // our pipelined send in progress to the peer (nodecopy.go)
	cin     *copyIn         // the peer's pipelined send we are taking
	broken  error           // set when a pipelined copy failed: the link is dropped
	fill    choose.Pair     // how a typed send's fragments go into the copy slots (fillPlain, fillStream; nodecopy.go)
	way     wayChooser      // pipelined or single copy for large sends (nodeway.go)

	// what cout, cin and a typed cout's layout point to: one of each at a
	// time, kept here so that a pipelined copy allocates nothing
	coutMem copyOut
	cinMem  copyIn
	coutU   typedRecv
}

// trySend sends one message, fabric.ErrAgain when the ring is full.
func (l *nodeLink) trySend(t uint64, b []byte) error { return l.trySendAux(t, 0, b) }

// trySendAux is trySend with the cell's aux word (a folded type
// signature, sigWord).
func (l *nodeLink) trySendAux(t uint64, aux uint32, b []byte) error {
	ok, err := l.out.TrySendAux(t, aux, b)
	if err != nil {
		return err
	}
	if !ok {
		return fabric.ErrAgain
	}
	return nil
}

// nodeInfo is what an endpoint publishes about its node transport.
type nodeInfo struct {
	native bool   // node transport on
	cma    bool   // its process allows cross-memory attach
	cap    int    // rings in its segment
	cells  int    // cells per ring
	slots  int    // medium slots per ring (nodemed.go)
	slotB  int    // bytes per medium slot
	cslots int    // pipelined copy slots per ring (nodecopy.go)
	cslotB int    // bytes per copy slot
	seg    string // segment file name
}

func (n nodeInfo) append(b []byte) []byte {
	var f byte
	if n.native {
		f |= 1
	}
	if n.cma {
		f |= 2
	}
	b = append(b, f)
	b = binary.LittleEndian.AppendUint32(b, uint32(n.cap))
	b = binary.LittleEndian.AppendUint32(b, uint32(n.cells))
	b = binary.LittleEndian.AppendUint16(b, uint16(n.slots))
	b = binary.LittleEndian.AppendUint32(b, uint32(n.slotB))
	b = binary.LittleEndian.AppendUint16(b, uint16(n.cslots))
	b = binary.LittleEndian.AppendUint32(b, uint32(n.cslotB))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(n.seg)))
	return append(b, n.seg...)
}

func parseNodeInfo(b []byte) (nodeInfo, []byte, error) {
	const fixed = 23
	if len(b) < fixed {
		return nodeInfo{}, nil, fmt.Errorf("node transport record of %d bytes", len(b))
	}
	n := nodeInfo{native: b[0]&1 != 0, cma: b[0]&2 != 0,
		cap: int(binary.LittleEndian.Uint32(b[1:])), cells: int(binary.LittleEndian.Uint32(b[5:])),
		slots: int(binary.LittleEndian.Uint16(b[9:])), slotB: int(binary.LittleEndian.Uint32(b[11:])),
		cslots: int(binary.LittleEndian.Uint16(b[15:])), cslotB: int(binary.LittleEndian.Uint32(b[17:]))}
	l := int(binary.LittleEndian.Uint16(b[21:]))
	if l > len(b)-fixed {
		return nodeInfo{}, nil, fmt.Errorf("node transport record: %d-byte name in %d bytes", l, len(b)-fixed)
	}
	n.seg = string(b[fixed : fixed+l])
	if n.native && (shmring.Layout(n.cells) < 0 || n.cap < 1 || n.cap > MaxRanks) {
		return nodeInfo{}, nil, fmt.Errorf("node transport record: %d rings of %d cells", n.cap, n.cells)
	}
	if n.slots > medMaxSlots || n.slotB%64 != 0 || n.slotB > 1<<20 || (n.slots > 0) != (n.slotB > 0) {
		return nodeInfo{}, nil, fmt.Errorf("node transport record: %d medium slots of %d bytes", n.slots, n.slotB)
	}
	if n.cslots > medMaxSlots || n.cslotB%64 != 0 || n.cslotB > maxCopySlot || (n.cslots > 0) != (n.cslotB > 0) {
		return nodeInfo{}, nil, fmt.Errorf("node transport record: %d copy slots of %d bytes", n.cslots, n.cslotB)
	}
	return n, b[fixed+l:], nil
}

func (n nodeInfo) segBytes() int {
	if n.cslots > 0 {
		return copyBase(n) + n.cap*copyAreaBytes(n.cslots, n.cslotB)
	}
	return nodeHdr + n.cap*(shmring.Layout(n.cells)+medAreaBytes(n.slots, n.slotB))
}

func (n nodeInfo) ring(mem []byte, i int) []byte {
	sz := shmring.Layout(n.cells)
	o := nodeHdr + i*sz
	return mem[o : o+sz : o+sz]
}

// cmaUsable reports whether this process may use cross-memory attach
// towards its peers: the kernel has the calls (no seccomp refusal), and
// Yama, where loaded, lets any process of the same uid read another.
var cmaUsable = sync.OnceValue(func() bool {
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil && strings.TrimSpace(string(b)) != "0" {
		return false
	}
	return cma.Available(os.Getpid()) == nil
})

// nodeGeometry returns the cells per ring and the inline limit for a
// segment of n rings: WEFT_TUNE's nodecells and nodeinline, with fewer
// cells when many rings would make the segment large.
func nodeGeometry(n int) (cells, inline int) {
	cells = int(tune.NodeCells)
	for cells > 64 && n*shmring.Layout(cells) > 16<<20 {
		cells /= 2
	}
	inline = min(int(tune.NodeInline), shmring.MaxInlineFor(cells))
	return cells, inline
}

// openNodeSeg creates v's segment with n rings, every ring initialised.
func (v *vci) openNodeSeg(n int) (nodeInfo, error) {
	cells, inline := nodeGeometry(n)
	info := nodeInfo{native: true, cma: cmaUsable(), cap: n, cells: cells}
	info.slots, info.slotB = medGeometry(n, inline)
	info.cslots, info.cslotB = copyGeometry(n)
	seg, err := nodeseg.Create("ep", info.segBytes())
	if err != nil {
		return nodeInfo{}, fmt.Errorf("endpoint: node transport segment: %w", err)
	}
	mem := seg.Bytes()
	for i := 0; i < n; i++ {
		if err := shmring.Init(info.ring(mem, i), cells, inline); err != nil {
			seg.Unlink()
			seg.Close()
			return nodeInfo{}, fmt.Errorf("endpoint: node transport ring: %w", err)
		}
	}
	binary.LittleEndian.PutUint64(mem, nodeMagic)
	v.lock() // v is registered for foreign progress already
	v.seg, v.segInfo = seg, info
	v.unlock()
	info.seg = seg.Name()
	return info, nil
}

// nodeMember is one endpoint of a node group as the records describe it.
type nodeMember struct {
	info nodeInfo
	proc string // identity of its process (same string: same process)
	ns   string // its node and pid namespace (CMA needs the same)
	pid  int
	id   peerwatch.Ident // its process, to tell whether it exited
}

// nodePaired reports whether members a and b of a group of size n talk
// through the node transport; every rank computes the same answer from
// the same records.
func nodePaired(a, b *nodeMember, n int) bool {
	if !a.info.native || !b.info.native || a.info.cap < n || b.info.cap < n {
		return false
	}
	if a.proc == b.proc {
		return true
	}
	return a.info.cma && b.info.cma && a.ns == b.ns && a.pid > 0 && b.pid > 0
}

// connectNode attaches v (member me of group) to every member it pairs
// with and returns which ones it does. On error v keeps no peer mapping.
// It takes v's lock to install the links (foreign progress may be
// polling v).
func (v *vci) connectNode(group []nodeMember, me int) ([]bool, error) {
	paired := make([]bool, len(group))
	v.lock()
	seg, info := v.seg, v.segInfo
	v.unlock()
	if seg == nil {
		return paired, nil
	}
	var peerSegs []*nodeseg.Seg
	mine := &group[me]
	links := make([]*nodeLink, len(group))
	want := 0
	fail := func(err error) ([]bool, error) {
		for _, s := range peerSegs {
			s.Close()
		}
		return nil, err
	}
	for m := range group {
		if !nodePaired(mine, &group[m], len(group)) {
			continue
		}
		paired[m] = true
		in, err := shmring.NewConsumer(info.ring(seg.Bytes(), m))
		if err != nil {
			return fail(fmt.Errorf("endpoint: node ring from member %d: %w", m, err))
		}
		var outMem, peerHdr []byte
		if m == me {
			outMem = info.ring(seg.Bytes(), me)
			peerHdr = seg.Bytes()[:nodeHdr]
		} else {
			want++
			peer, err := nodeseg.Open(group[m].info.seg, group[m].info.segBytes())
			if err != nil {
				return fail(fmt.Errorf("endpoint: node segment of member %d (is the node identity right? %s): %w", m, "WEFT_NODE_ID", err))
			}
			peerSegs = append(peerSegs, peer)
			pm := peer.Bytes()
			if binary.LittleEndian.Uint64(pm) != nodeMagic {
				return fail(fmt.Errorf("endpoint: node segment %s of member %d is not an endpoint segment: %w", group[m].info.seg, m, ErrInvalid))
			}
			atomic.AddUint64((*uint64)(unsafe.Pointer(&pm[offAttached])), 1)
			outMem = group[m].info.ring(pm, me)
			peerHdr = pm[:nodeHdr]
		}
		out, err := shmring.NewProducer(outMem)
		if err != nil {
			return fail(fmt.Errorf("endpoint: node ring to member %d: %w", m, err))
		}
		links[m] = &nodeLink{out: out, in: in, inline: out.MaxInline(), pid: group[m].pid, id: group[m].id,
			local: group[m].proc == mine.proc, member: m, peerHdr: peerHdr,
			medIn: newMedArea(info, seg.Bytes(), m), cpIn: newCopyArea(info, seg.Bytes(), m)}
		if m == me {
			links[m].medOut = newMedArea(info, seg.Bytes(), me)
			links[m].cpOut = newCopyArea(info, seg.Bytes(), me)
		} else {
			pm := peerSegs[len(peerSegs)-1].Bytes()
			links[m].medOut = newMedArea(group[m].info, pm, me)
			links[m].cpOut = newCopyArea(group[m].info, pm, me)
		}
	}
	v.lock()
	v.links, v.attachWant, v.peerSegs = links, uint64(want), peerSegs
	v.maybeUnlink()
	v.unlock()
	return paired, nil
}

// maybeUnlink removes v's segment file once every paired peer has mapped it.
func (v *vci) maybeUnlink() {
	if !v.seg.Linked() {
		return
	}
	mem := v.seg.Bytes()
	if atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[offAttached]))) >= v.attachWant {
		if err := v.seg.Unlink(); err != nil {
			v.log.Warn("unlink node segment", "err", err)
		}
	}
}

// waitAttached returns once every peer v pairs with has mapped v's
// segment (and the file is unlinked), so that no rank leaves its set-up
// while a peer still has to open that file: a rank that then failed at
// once (a bad argument found right after Init) would unlink its file on
// the way out and leave its slower peers a missing-file error in place of
// its own. A peer process that exits first (ids, by world rank) ends the
// wait with ErrPeerGone; the endpoint timeout bounds it.
func (v *vci) waitAttached(ids []peerwatch.Ident) error {
	start := time.Now()
	for i := 1; ; i++ {
		v.lock()
		if v.seg != nil && v.seg.Linked() {
			v.maybeUnlink()
		}
		waiting := v.seg != nil && v.seg.Linked()
		v.unlock()
		if !waiting {
			return nil
		}
		if i%256 == 0 {
			for _, id := range ids {
				if id.Exited() {
					return fmt.Errorf("endpoint: node peer process %d exited before it mapped this endpoint's segment: %w", id.PID, ErrPeerGone)
				}
			}
			if time.Since(start) > v.timeout {
				return fmt.Errorf("endpoint: node peers did not map this endpoint's segment within %v: %w", v.timeout, errs.ErrTimeout)
			}
		}
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// closeNode unlinks and unmaps v's segments (idempotent).
func (v *vci) closeNode() error {
	var errs []error
	if v.seg != nil {
		errs = append(errs, v.seg.Unlink(), v.seg.Close())
		v.seg = nil
	}
	for _, s := range v.peerSegs {
		errs = append(errs, s.Close())
	}
	v.peerSegs, v.links = nil, nil
	return errors.Join(errs...)
}

// link returns the node link a message to or from rank r of c uses, or nil.
func (c *Comm) link(r int) *nodeLink {
	if r < 0 || r >= len(c.links) {
		return nil
	}
	if m := c.links[r]; m >= 0 {
		return c.v.links[m]
	}
	return nil
}

// pollNode takes what arrived in v's rings. Caller holds the lock.
func (v *vci) pollNode() {
	if v.seg.Linked() {
		v.maybeUnlink()
	}
	for _, l := range v.links {
		if l == nil {
			continue
		}
		if l.cout != nil {
			v.pumpCopyOut(l)
		}
		if l.way.pipeN != 0 {
			v.pipeCheck(l, -1)
		}
		if l.cin != nil && !v.pumpCopyIn(l) || l.broken != nil {
			continue // the rest of this ring waits for the copy in progress
		}
		for k := 0; k < nodeBurst; k++ {
			t, n, ok, err := l.in.Peek()
			if err != nil {
				v.log.Error("node ring corrupt; messages from this peer are lost", "member", l.member, "err", err)
				break
			}
			if !ok {
				break
			}
			v.nodeMessage(l, t, n)
			if l.cin != nil || l.broken != nil {
				break
			}
		}
	}
}

// nodeMessage handles the message of n bytes with match word t at the
// head of l's ring: into the first matching posted receive, else into the
// unexpected queue.
func (v *vci) nodeMessage(l *nodeLink, t uint64, n int) {
	if isMedium(l, t, n) {
		v.nodeMedium(l, t)
		return
	}
	if tagIsCtrl(t) || tagIsRTS(t) {
		b := &v.ctrlIn // (a local array escapes through incoming)
		_, m, _, _ := l.in.TryRecv(b[:])
		v.incoming(t, b[:min(m, len(b))])
		return
	}
	aux := l.in.Aux()
	for r := v.posted.head; r != nil; r = r.qnext {
		if tagMatches(t, r.want, r.ignore) {
			v.posted.remove(r)
			if err := checkSigWord(r, aux, uint64(n)); err != nil {
				l.in.TryRecv(nil) // consumed, not taken
				r.st = Status{Source: tagSource(t), Tag: tagUser(t)}
				v.finish(r, err)
				return
			}
			var m int
			if r.reqExt != nil && r.typed != nil {
				// Gathered out of the cells, then unpacked in one call: an
				// unpack per 56-byte cell costs more than the copy.
				b := v.inlineScratch(n)
				_, m, _, _ = l.in.TryRecv(b)
				r.take(0, b[:min(m, len(b))])
			} else {
				l.in.Take(r.buf, n) // the message Peek reported; truncation is reported below
				m = n
			}
			c := r.capacity()
			r.st = Status{Source: tagSource(t), Tag: tagUser(t), Count: min(m, c)}
			var err error
			if m > c {
				err = fmt.Errorf("endpoint: message of %d bytes from rank %d into %d: %w", m, r.st.Source, c, ErrTruncated)
			}
			v.finish(r, err)
			return
		}
	}
	data := v.smallBuf(n)
	l.in.Take(data, n)
	v.appendUnexpected(unexp{tag: t, data: data, sig: aux})
}

// medFirst is the size from which a message the ring could carry inline
// goes through a free medium slot instead, when one is free: one copy in
// and one out of a contiguous slot cost less than the same bytes spread
// over the ring's cells (a 1 KiB half round trip 0.22–0.33 µs against
// 0.71, and 512 B messages at 6.1 M/s against 3.5 M/s in windows of 64;
// below 256 B the cells, written in one copy, are as fast;
// docs/perf/endpoint.md). With every slot busy (a window of sends) the
// cells take the message.
const medFirst = 256

// slotFits reports whether a message of n bytes to l's peer may take a
// medium slot: the pair has slots, n is at most their size, and the ring
// cannot carry it inline or it is at least medFirst.
func (l *nodeLink) slotFits(n int) bool {
	return l.medOut != nil && n <= l.medOut.size && (n >= medFirst || n > l.inline)
}

// nodeSendStaged sends buf over l to rank dest of c with match word t
// and type-signature hash sig (0: untyped); with staged buf is a staging
// buffer of v's already holding the message (a typed send packed it
// there); blocking tells that the caller waits for the send at once.
func (v *vci) nodeSendStaged(c *Comm, l *nodeLink, buf []byte, t uint64, dest int, staged bool, sig uint64, blocking bool) (*Request, error) {
	if l.broken != nil {
		if staged {
			v.unstage(buf)
		}
		return nil, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", len(buf), dest, l.broken)
	}
	if len(buf) <= l.inline && !staged {
		aux := sigWord(sig)
		if l.slotFits(len(buf)) && len(v.sendq) == 0 && v.nodeSendMedium(l, t, aux, buf) {
			return completedRequest, nil
		}
		if len(v.sendq) == 0 {
			err := l.trySendAux(t, aux, buf)
			if err != nil && errors.Is(err, fabric.ErrAgain) {
				err = v.tryPost(func() error { return l.trySendAux(t, aux, buf) })
			}
			if err == nil {
				return completedRequest, nil
			}
			if !errors.Is(err, fabric.ErrAgain) {
				return nil, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", len(buf), dest, err)
			}
		}
		// The peer's ring is full: queue a copy; progress sends it.
		r := &Request{v: v, c: c, kind: kSendEager, state: stPosted, buf: buf, qrank: dest,
			reqExt: &reqExt{link: l, qinject: true, qdata: append([]byte(nil), buf...), qtag: t, qaux: aux}}
		v.enqueue(r)
		return r, nil
	}
	if l.slotFits(len(buf)) && len(v.sendq) == 0 && v.nodeSendMedium(l, t, sigWord(sig), buf) {
		if staged {
			v.unstage(buf)
		}
		return completedRequest, nil
	}
	var timed time.Time // a single copy timed for l.way
	if !staged && v.nodeCopyFits(l, len(buf)) {
		// An Isend that does not fit in the free copy slots takes the
		// single copy whatever the way (nodeCopyTakes), and is timed as one.
		now := time.Now()
		if l.way.pick(len(buf), now) == wayPipe && v.nodeCopyTakes(l, len(buf), blocking, false) {
			if r, ok := v.nodeSendCopy(c, l, t, sigWord(sig), buf, dest, now); ok {
				return r, nil
			}
		} else {
			timed = now
		}
	}
	// Rendezvous: the receiver copies from buf and answers with a FIN. Up
	// to the eager limit the data is first copied into a staging buffer
	// and the send is complete at once (eager semantics); the staging
	// buffer is recycled when the FIN comes.
	if !staged && len(buf) <= v.eagerLimit {
		b := v.stage(len(buf))
		copy(b, buf)
		buf, staged = b, true
	}
	r, err := v.nodeRdv(c, l, buf, t, dest, staged, 0, sig)
	switch {
	case err != nil:
		return nil, err
	case staged:
		return completedRequest, nil
	}
	r.reqExt.timed = timed
	return r, nil
}

// nodeRdv sends the rendezvous header for buf (a staging buffer of v's
// when staged) over l and returns the send's request, which completes on
// the FIN; flags go into the header's key field (pipeBit), and sig, the
// hash of the message's type signature (0: untyped), into its extension.
func (v *vci) nodeRdv(c *Comm, l *nodeLink, buf []byte, t uint64, dest int, staged bool, flags, sig uint64) (*Request, error) {
	r := v.newSend(c, kSendRdv, buf, dest)
	x := r.ext()
	x.link, x.qinject, x.qtag, x.staged = l, true, t|rtsBit, staged
	v.seq++
	r.seq = v.seq
	var addr uint64
	if l.local {
		r.lkey = localPut(buf)
		addr = r.lkey
	} else {
		r.pinBuf(buf)
		addr = uint64(cma.Addr(buf))
	}
	r.qdata = putNodeHeader(&x.hdr, rdvHeader{addr: addr, key: flags, size: uint64(len(buf)), seq: r.seq}, sig)
	if flags&pipeBit != 0 {
		v.setPipeWord(r.seq, 0) // before the header can be seen
	}
	v.rdvSends[r.seq] = r
	if err := v.submit(r); err != nil {
		delete(v.rdvSends, r.seq)
		r.unpinAll()
		return nil, fmt.Errorf("endpoint: rendezvous header to rank %d: %w", dest, err)
	}
	return r, nil
}

// putNodeHeader writes into b the rendezvous header h of a node message
// whose type signature hashes to sig and returns it: 32 bytes, or for a
// typed message the extended header of fabtyped.go carrying sig.
func putNodeHeader(b *[rdvExtSize]byte, h rdvHeader, sig uint64) []byte {
	if sig == 0 {
		h.put(b[:rdvHeaderSize])
		return b[:rdvHeaderSize]
	}
	h.put(b[:])
	putExt(b[:], modePlain, sig)
	return b[:]
}

// maxStages bounds the staging buffers an endpoint keeps for reuse.
const maxStages = 64

// stage returns a staging buffer of n bytes (n ≤ the eager limit).
func (v *vci) stage(n int) []byte {
	for i := len(v.stages) - 1; i >= 0; i-- {
		if b := v.stages[i]; cap(b) >= n {
			last := len(v.stages) - 1
			v.stages[i] = v.stages[last]
			v.stages[last] = nil
			v.stages = v.stages[:last]
			return b[:n]
		}
	}
	return make([]byte, n, max(n, v.eagerLimit))
}

// maxStageBytes bounds the size of a staging buffer kept for reuse.
const maxStageBytes = 8 << 20

// unstage takes back the staging buffer of a finished send.
func (v *vci) unstage(b []byte) {
	if len(v.stages) < maxStages && cap(b) >= v.eagerLimit && cap(b) <= maxStageBytes {
		v.stages = append(v.stages, b[:0])
	}
}

// postNode hands queued send r to its ring (fabric.ErrAgain when full).
func (v *vci) postNode(r *Request) error {
	if err := r.link.trySendAux(r.qtag, r.qaux, r.qdata); err != nil {
		return err
	}
	if r.kind == kSendEager {
		v.finish(r, nil)
	} // a rendezvous send completes on its FIN
	return nil
}

// nodeRead serves receive r matched with rendezvous header h that came
// over link l: the data is copied straight from the sender's buffer, the
// receive completes and a FIN goes back (now, or from progress when the
// ring towards the sender is full).
func (v *vci) nodeRead(r *Request, l *nodeLink, t uint64, h rdvHeader, reject error) {
	src := tagSource(t)
	c := r.capacity()
	n := c
	if uint64(n) > h.size {
		n = int(h.size)
	}
	if reject != nil { // a type-signature mismatch: nothing is read
		r.st = Status{Source: src, Tag: tagUser(t)}
		f := nodeFin{link: l, seq: h.seq, status: finOK}
		if f.send() != nil {
			v.nodeFins = append(v.nodeFins, f)
		}
		v.finish(r, reject)
		return
	}
	r.st = Status{Source: src, Tag: tagUser(t), Count: n}
	status := uint64(finOK)
	var err error
	typed := r.reqExt != nil && r.typed != nil
	switch {
	case n == 0:
	case h.key&iovBit != 0:
		err = v.nodeGather(r, l, h, n)
	case h.key&pipeBit != 0:
		err = v.nodePipeRead(r, l, h, n, typed)
	case l.local && typed:
		err = localTake(h.addr, n, r.take) // unpacked straight from the sender's buffer
	case l.local:
		err = localCopy(h.addr, r.buf[:n])
	case typed:
		err = v.cmaTake(r, l.pid, uintptr(h.addr), n)
	default:
		_, err = cma.Read(l.pid, r.buf[:n], uintptr(h.addr))
	}
	switch {
	case err != nil:
		status = finFailed
		err = fmt.Errorf("endpoint: rendezvous copy from rank %d: %w", src, err)
	case uint64(c) < h.size:
		status = finTruncated
		err = fmt.Errorf("endpoint: rendezvous message of %d bytes from rank %d into %d: %w", h.size, src, c, ErrTruncated)
	}
	f := nodeFin{link: l, seq: h.seq, status: status}
	if f.send() != nil {
		v.nodeFins = append(v.nodeFins, f)
	}
	v.finish(r, err)
}

// nodeFin is a FIN owed to a sender over the node transport.
type nodeFin struct {
	link   *nodeLink
	seq    uint64
	status uint64
}

func (f nodeFin) send() error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], f.status)
	return f.link.trySend(ctrlTag(f.seq), b[:])
}

// retryNodeFins sends the FINs a full ring held back.
func (v *vci) retryNodeFins() {
	n := 0
	for _, f := range v.nodeFins {
		if err := f.send(); err != nil {
			v.nodeFins[n] = f
			n++
		}
	}
	clear(v.nodeFins[n:])
	v.nodeFins = v.nodeFins[:n]
}

// localBufs holds the buffers of rendezvous sends between endpoints of
// this process: the receiver finds the buffer by key and copies from it
// (the key, not an address, crosses the ring, so no pointer is rebuilt
// from an integer). An entry lives until its send completes or fails.
var localBufs struct {
	sync.Mutex
	next uint64
	m    map[uint64]*localBuf
}

// localBuf is one buffer of localBufs. read is set once the receiver has
// copied it. The FIN that lets the sender reuse the buffer already orders
// the copy before the reuse, but through a ring in shared memory, which
// the race detector does not follow; storing read after the copy and
// loading it when the entry goes makes the same order visible to it.
type localBuf struct {
	b    []byte
	segs []ddt.Segment // a gather send: the blocks of b, in stream order
	read atomic.Bool
}

func localPut(b []byte) uint64 { return localPutSegs(b, nil) }

func localPutSegs(b []byte, segs []ddt.Segment) uint64 {
	localBufs.Lock()
	defer localBufs.Unlock()
	if localBufs.m == nil {
		localBufs.m = map[uint64]*localBuf{}
	}
	localBufs.next++
	localBufs.m[localBufs.next] = &localBuf{b: b, segs: segs}
	return localBufs.next
}

func localDel(k uint64) {
	localBufs.Lock()
	e := localBufs.m[k]
	delete(localBufs.m, k)
	localBufs.Unlock()
	if e != nil {
		_ = e.read.Load()
	}
}

// localTake hands the first n bytes of the buffer with key k to take.
func localTake(k uint64, n int, take func(off int, b []byte)) error {
	localBufs.Lock()
	e := localBufs.m[k]
	localBufs.Unlock()
	if e == nil || len(e.b) < n {
		return fmt.Errorf("endpoint: rendezvous buffer of this process gone (sending endpoint closed): %w", ErrPeerGone)
	}
	take(0, e.b[:n])
	e.read.Store(true)
	return nil
}

// chunkBytes is the piece a typed receive copies from another process at
// a time before unpacking it: small enough to stay in the cache between
// the copy and the unpack, and large enough that the unpack of a piece
// runs whole calls of the type's compiled code (the JIT moves 1 MiB per
// call; FFT2's transposes unpacked 20 times slower in 128 KiB pieces,
// docs/perf/typed.md).
const chunkBytes = 1 << 20

// cmaTake copies n bytes from address addr of process pid into typed
// receive r, a chunk at a time through v's chunk buffer, unpacking each.
func (v *vci) cmaTake(r *Request, pid int, addr uintptr, n int) error {
	if v.chunk == nil {
		v.chunk = make([]byte, chunkBytes)
	}
	for off := 0; off < n; {
		k := min(n-off, len(v.chunk))
		if _, err := cma.Read(pid, v.chunk[:k], addr+uintptr(off)); err != nil {
			return err
		}
		r.take(off, v.chunk[:k])
		off += k
	}
	return nil
}

func localCopy(k uint64, dst []byte) error {
	localBufs.Lock()
	e := localBufs.m[k]
	localBufs.Unlock()
	if e == nil || len(e.b) < len(dst) {
		return fmt.Errorf("endpoint: rendezvous buffer of this process gone (sending endpoint closed): %w", ErrPeerGone)
	}
	copy(dst, e.b)
	e.read.Store(true)
	return nil
}

// procKey names a process: its node, pid namespace, pid and start time.
func procKey(id peerwatch.Ident) string {
	return id.Node + "/" + strconv.Itoa(id.PID) + "/" + strconv.FormatUint(id.Start, 10)
}

// connectWorld pairs the world endpoint v with the world ranks of its node
// (the records' node keys) and sets the world communicator's links.
func (w *World) connectWorld(v *vci, nodes []nodeInfo, ids []peerwatch.Ident) error {
	c := w.comm
	var group []nodeMember
	var ranks []int
	me := -1
	for r := range nodes {
		if c.hosts[r] != c.hosts[c.rank] {
			continue
		}
		if r == c.rank {
			me = len(group)
		}
		group = append(group, nodeMember{info: nodes[r], proc: procKey(ids[r]), ns: ids[r].Node, pid: ids[r].PID, id: ids[r]})
		ranks = append(ranks, r)
	}
	paired, err := v.connectNode(group, me)
	if err != nil {
		return err
	}
	c.links = nil
	n := 0
	for m, r := range ranks {
		if paired[m] {
			if c.links == nil {
				c.links = make([]int32, c.size)
				for i := range c.links {
					c.links[i] = -1
				}
			}
			c.links[r] = int32(m)
			n++
		}
	}
	v.lock()
	v.crowded = crowdedNode(len(group))
	v.solo = true // the world's endpoint, one per process
	v.noNet = n == c.size
	if v.seg != nil && n == 0 {
		v.closeNode() // nobody to talk to this way
	}
	v.unlock()
	if err := v.waitAttached(ids); err != nil {
		return err
	}
	w.log.Debug("node transport", "peers", n, "of", len(group), "on this node")
	return nil
}

// connectEndpoints sets up the node transport of the endpoints vcis this
// process opened for a new communicator of CreateEndpoints. It is
// collective over the parent c: every rank creates its endpoints'
// segments, sized for the endpoints of its node, and an allgather carries
// their names. addrOwner[a] is the parent rank owning distinct address a,
// addrIdx[a] its index among that rank's endpoints, rankAddr[r] the
// address of rank r of the new communicator. It returns the new
// communicator's links (nil when no pair uses the node transport).
func (w *World) connectEndpoints(ctx context.Context, c *Comm, native bool, vcis []*vci, addrOwner, addrIdx, rankAddr []int) ([]int32, error) {
	myHost := c.hosts[c.rank]
	pos := make([]int, len(addrOwner))
	var group []nodeMember
	var groupAddr []int
	for a, pr := range addrOwner {
		pos[a] = -1
		if c.hosts[pr] == myHost {
			pos[a] = len(group)
			id := w.ids[c.world[pr]]
			group = append(group, nodeMember{proc: procKey(id), ns: id.Node, pid: id.PID, id: id})
			groupAddr = append(groupAddr, a)
		}
	}
	rec := binary.LittleEndian.AppendUint32(nil, uint32(len(vcis)))
	for _, v := range vcis {
		var ni nodeInfo
		if native {
			var err error
			if ni, err = v.openNodeSeg(len(group)); err != nil {
				w.log.Warn("node transport off for an endpoint", "err", err)
				ni = nodeInfo{}
			}
		}
		rec = ni.append(rec)
	}
	all, err := c.Allgather(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("endpoint: exchange node transport records: %w", err)
	}
	infos := make([][]nodeInfo, len(all))
	for pr, b := range all {
		if len(b) < 4 {
			return nil, fmt.Errorf("endpoint: node transport record of rank %d is %d bytes: %w", pr, len(b), ErrInvalid)
		}
		cnt := int(binary.LittleEndian.Uint32(b))
		b = b[4:]
		for i := 0; i < cnt; i++ {
			ni, rest, err := parseNodeInfo(b)
			if err != nil {
				return nil, fmt.Errorf("endpoint: node transport record of rank %d: %v: %w", pr, err, ErrInvalid)
			}
			infos[pr] = append(infos[pr], ni)
			b = rest
		}
	}
	for m, a := range groupAddr {
		pr, i := addrOwner[a], addrIdx[a]
		if i >= len(infos[pr]) {
			return nil, fmt.Errorf("endpoint: rank %d published %d node transport records, endpoint %d missing: %w", pr, len(infos[pr]), i, ErrInvalid)
		}
		group[m].info = infos[pr][i]
	}
	var paired []bool
	for li, v := range vcis {
		me := -1
		for a := range addrOwner {
			if addrOwner[a] == c.rank && addrIdx[a] == li {
				me = pos[a]
			}
		}
		if me < 0 {
			return nil, fmt.Errorf("endpoint: endpoint %d of this rank missing from its node group: %w", li, ErrInvalid)
		}
		p, err := v.connectNode(group, me)
		if err != nil {
			return nil, err
		}
		if paired == nil {
			paired = p
		}
	}
	for _, v := range vcis { // after every endpoint of this process attached
		if err := v.waitAttached(w.ids); err != nil {
			return nil, err
		}
	}
	var links []int32
	n := 0
	for r, a := range rankAddr {
		if m := pos[a]; m >= 0 && paired != nil && paired[m] {
			if links == nil {
				links = make([]int32, len(rankAddr))
				for i := range links {
					links[i] = -1
				}
			}
			links[r] = int32(m)
			n++
		}
	}
	for _, v := range vcis {
		v.lock()
		v.crowded = crowdedNode(len(group))
		v.solo = len(vcis) == 1
		v.noNet = n == len(rankAddr)
		if v.seg != nil && n == 0 {
			v.closeNode()
		}
		v.unlock()
	}
	return links, nil
}

// Transports a peer may be reached through (Comm.Transport).
const (
	// TransportNode is weft's node transport: shared-memory rings between
	// ranks of one node, single-copy rendezvous for large messages.
	TransportNode = "node"
	// TransportFabric is libfabric, through the communicator's provider.
	TransportFabric = "fabric"
)

// Transport reports how this handle exchanges point-to-point messages
// with rank r of the communicator: TransportNode or TransportFabric.
func (c *Comm) Transport(r int) (string, error) {
	if err := c.checkPeer(r, false); err != nil {
		return "", err
	}
	if c.link(r) != nil {
		return TransportNode, nil
	}
	return TransportFabric, nil
}

// WorldRank returns the world rank of the process that holds rank r of
// the communicator (of an intercommunicator: of its remote group), as
// MPI_Group_translate_ranks into the world's group does (where a
// process is one rank): every endpoint handle of one process has its
// process's world rank. Statistics and layers that report per process
// use it.
func (c *Comm) WorldRank(r int) (int, error) {
	if err := c.checkPeer(r, false); err != nil {
		return 0, err
	}
	return int(c.world[r]), nil
}

// crowdedNode reports whether n busy endpoints on this machine outnumber
// the cores they share (wait.Crowded; WEFT_TUNE epwait: auto decides so,
// spin never, yield always).
func crowdedNode(n int) bool {
	switch tune.EPWait {
	case "spin":
		return false
	case "yield":
		return true
	}
	return wait.Crowded(n)
}

// Gather rendezvous: a large typed message whose blocks are big enough is
// not packed by its sender at all. The header names the sender's block
// table (iovBit | number of blocks in the key field); the receiver reads
// the table, then the blocks themselves, in one process_vm_readv each
// (straight into its buffer, or a chunk at a time to unpack into its own
// layout), or, in one process, unpacks straight from the sender's blocks.
const (
	iovBit = uint64(1) << 63
	// maxIovSegs bounds the block table (16 bytes a block).
	maxIovSegs = 1 << 16
)

// minIovBlock is the average block size from which gathering the blocks
// beats packing them (WEFT_TUNE nodegather): below it the kernel's cost
// per remote iovec (about 0.4 µs, docs/perf/typed.md) exceeds what the
// pack of a block costs, which the pipelined pack hides besides.
func minIovBlock() int { return int(tune.NodeGather) }

// isendTypedGather sends count elements of t in buf (n packed bytes) to a
// node peer by gather rendezvous; done is false when the message is not
// one for it (not a node peer, up to the eager limit, too many or too
// small blocks).
func (c *Comm) isendTypedGather(buf []byte, count int, t *ddt.Type, n, dest, tag int, blocking bool) (*Request, bool, error) {
	l := c.link(dest)
	if l == nil || n <= c.v.eagerLimit {
		return nil, false, nil
	}
	// Only layouts whose blocks average minIovBlock bytes qualify. Blocks
	// counts them from the type's description (an upper bound: blocks at
	// element boundaries may still merge), so a layout of many small
	// blocks costs next to nothing here; Flatten walking up to n/256
	// blocks before giving up cost as much as the pack itself.
	if n/minIovBlock() < 1 {
		return nil, false, nil
	}
	if nb, err := t.Blocks(count); err != nil || nb > int64(min(maxIovSegs, n/minIovBlock())) {
		return nil, false, nil
	}
	v := c.v
	v.lock()
	defer v.unlock()
	if !l.local && v.nodeCopyTakes(l, n, blocking, true) {
		// The pipelined copy packs the blocks into the copy area while
		// the receiver unpacks them: two copies that overlap, with
		// non-temporal stores where plain ones wait for the lines, where
		// the receiver's process_vm_readv makes one copy alone, with
		// plain stores (LAMMPS's 4 blocks of 20-120 KB: 71 µs against
		// 25 for hand packing in the slow regime). Checked before the
		// blocks are listed, which that path does not need.
		return nil, false, nil
	}
	segs, err := t.Flatten(count, min(maxIovSegs, n/minIovBlock()))
	if err != nil || len(segs) == 0 || n/len(segs) < minIovBlock() {
		return nil, false, nil
	}
	if _, err := v.beginSend(); err != nil { // a queued header still goes after the queue (submit)
		return nil, true, err
	}
	w := packTag(c.ctx, c.slots[dest], c.rank, tag)
	r := v.newSend(c, kSendRdv, buf, dest)
	x := r.ext()
	x.link, x.qinject, x.qtag = l, true, w|rtsBit
	v.seq++
	r.seq = v.seq
	var addr uint64
	if l.local {
		r.lkey = localPutSegs(buf, segs)
		addr = r.lkey
	} else {
		base := uint64(cma.Addr(buf))
		tbl := make([]uint64, 2*len(segs))
		for i, s := range segs {
			tbl[2*i], tbl[2*i+1] = base+uint64(s.Off), uint64(s.Len)
		}
		r.pinBuf(buf)
		r.pin.Pin(&tbl[0])
		r.iov = tbl
		addr = uint64(uintptr(unsafe.Pointer(&tbl[0])))
	}
	u := typedRecv{buf: buf, count: count, t: t, n: n}
	r.qdata = putNodeHeader(&x.hdr, rdvHeader{addr: addr, key: iovBit | uint64(len(segs)), size: uint64(n), seq: r.seq}, u.signature())
	v.rdvSends[r.seq] = r
	if err := v.submit(r); err != nil {
		delete(v.rdvSends, r.seq)
		r.unpinAll()
		return nil, true, fmt.Errorf("endpoint: rendezvous header to rank %d: %w", dest, err)
	}
	return r, true, nil
}

// nodeGather serves receive r from gather header h over link l: n bytes
// of the stream.
func (v *vci) nodeGather(r *Request, l *nodeLink, h rdvHeader, n int) error {
	nsegs := int(h.key &^ iovBit)
	if nsegs <= 0 || nsegs > maxIovSegs {
		return fmt.Errorf("endpoint: gather of %d blocks: %w", nsegs, ErrInvalid)
	}
	if l.local {
		localBufs.Lock()
		e := localBufs.m[h.addr]
		localBufs.Unlock()
		if e == nil {
			return fmt.Errorf("endpoint: rendezvous buffer of this process gone (sending endpoint closed): %w", ErrPeerGone)
		}
		off := 0
		for _, s := range e.segs {
			if off >= n {
				break
			}
			k := min(int(s.Len), n-off)
			r.take(off, e.b[s.Off:s.Off+int64(k)])
			off += k
		}
		e.read.Store(true)
		return nil
	}
	tbl := make([]byte, 16*nsegs)
	if _, err := cma.Read(l.pid, tbl, uintptr(h.addr)); err != nil {
		return err
	}
	segs := make([]cma.Seg, nsegs)
	total := 0
	for i := range segs {
		a, ln := binary.LittleEndian.Uint64(tbl[16*i:]), binary.LittleEndian.Uint64(tbl[16*i+8:])
		if ln > uint64(h.size) {
			return fmt.Errorf("endpoint: gather block of %d bytes in a message of %d: %w", ln, h.size, ErrInvalid)
		}
		segs[i] = cma.Seg{Addr: uintptr(a), Len: int(ln)}
		total += int(ln)
	}
	if total < n {
		return fmt.Errorf("endpoint: gather blocks hold %d bytes of %d: %w", total, n, ErrInvalid)
	}
	if r.reqExt == nil || r.typed == nil {
		_, err := cma.ReadSegs(l.pid, r.buf[:n], segs)
		return err
	}
	if v.chunk == nil {
		v.chunk = make([]byte, chunkBytes)
	}
	si, skip := 0, 0
	window := make([]cma.Seg, 0, 64)
	for off := 0; off < n; {
		k := min(n-off, len(v.chunk))
		window = window[:0]
		for got := 0; got < k; si, skip = si+1, 0 {
			s := segs[si]
			take := min(s.Len-skip, k-got)
			window = append(window, cma.Seg{Addr: s.Addr + uintptr(skip), Len: take})
			got += take
			if skip+take < s.Len { // this block goes on in the next chunk
				skip += take
				break
			}
		}
		if _, err := cma.ReadSegs(l.pid, v.chunk[:k], window); err != nil {
			return err
		}
		r.take(off, v.chunk[:k])
		off += k
	}
	return nil
}

// inlineScratch returns v's buffer for one inline message of n bytes.
func (v *vci) inlineScratch(n int) []byte {
	if cap(v.scratch) < n {
		v.scratch = make([]byte, n)
	}
	return v.scratch[:n]
}
