package endpoint

// Pipelined copy in, copy out: large messages to a peer in another
// process, from WEFT_TUNE's nodecopy on, go through a per-pair copy area
// next to the medium slots, a fragment of one copy slot (nodecopyslot) at
// a time.
//
// An endpoint's segment holds one copy area per ring (per sending
// member), after its rings and medium areas, page-aligned: a page of
// flags, one word per slot copyFlagStride bytes apart, then the slots.
// The receiver polls a flag while the sender fills the slot: on a page of
// its own, the flag does not draw the slot's lines to the receiver's core
// (adjacent-line and stream prefetchers stop at page boundaries), which
// made every store of the sender a cross-core miss. The sender puts a 16-byte header
// (copyMagic, first slot, size) through the ring as an rts message, the
// folded type signature in the cell's aux word, then copies fragment j
// into slot (first+j) mod slots as soon as the receiver has freed that
// slot, marking it full with a release store. The receiver, once it has
// taken the header, copies each full slot out in order (into the matched
// receive, or into an unexpected buffer) and frees it, so that the
// sender copies the next fragments in while the receiver copies the
// previous ones out, one copy on each core. Both sides are driven by
// progress: Isend copies what the free slots hold and returns; the send
// completes when its last fragment is in a slot (its buffer is then free,
// as with an eager send).
//
// Order: while a receiver has a copy in progress from a peer, it takes
// nothing else from that peer's ring, so every later message of the pair
// is matched after it. While a sender has one in progress towards a peer,
// its later large messages to that peer go by rendezvous, behind the
// header in the ring. A peer that stops mid-message (killed, or stalled
// for the endpoint timeout) fails the message on the other side
// (ErrPeerGone, errs.ErrTimeout) and the pair's link is dropped: no later
// message is taken from a ring whose slots are in an unknown state.

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/memcopy"
	"github.com/weft-hpc/weft/internal/peerwatch"
	"github.com/weft-hpc/weft/internal/release"
)

// copyMagic marks a pipelined copy header ("wedc"); medMagic a medium one.
const copyMagic = 0x63646577

// copyStallPolls is how many polls without a moving fragment go by
// between two looks at the clock (and the peer) in a pipelined copy.
const copyStallPolls = 256

// copyOut is a pipelined send in progress on a link.
type copyOut struct {
	r    *Request // the send's request (nil while Isend runs)
	buf  []byte
	u    *typedRecv // a typed send's layout, packed into the slots (nil: buf's bytes)
	n    int        // bytes of the message
	frag int        // bytes per fragment (the last may be short)
	off  int        // bytes copied into slots
	slot int        // slot of the next fragment
	t0   time.Time  // a timed send's start (the link's way chooser; typed: its fill chooser)
	// stream: a typed send's fragments are packed into private memory and
	// streamed into the slots (fillStream), not packed into them
	stream bool
	stall
}

// copyIn is a pipelined receive in progress on a link.
type copyIn struct {
	r      *Request // the matched receive; nil: into data (unexpected)
	reject error    // r's type signature does not match: discard
	t      uint64
	aux    uint32
	data   []byte // the unexpected buffer
	size   int
	frag   int // bytes per fragment, as the header says
	off    int // bytes copied out of slots
	slot   int // slot of the next fragment
	stall
}

// stall watches one side of a pipelined copy for a peer that stopped.
type stall struct {
	polls int
	since time.Time
	pace  peerwatch.Pacer
}

// check is called on a poll that moved nothing: every copyStallPolls
// polls it fails once nothing has moved for timeout or the peer's
// process is gone.
func (s *stall) check(l *nodeLink, timeout time.Duration, what string, off, size int) error {
	s.polls++
	if s.polls%copyStallPolls != 0 {
		return nil
	}
	if s.since.IsZero() {
		s.since = time.Now()
		return nil
	}
	if s.pace.Due() && l.id.Exited() {
		return fmt.Errorf("endpoint: %s stopped at %d of %d bytes: node peer process %d exited: %w", what, off, size, l.id.PID, ErrPeerGone)
	}
	if time.Since(s.since) > timeout {
		return fmt.Errorf("endpoint: %s stalled at %d of %d bytes for %v: %w", what, off, size, timeout, errs.ErrTimeout)
	}
	return nil
}

// moved resets the watch after a fragment moved.
func (s *stall) moved() { s.polls, s.since = 0, time.Time{} }

const (
	// copySlots is the number of slots of a copy area when the segment
	// has room; at least copyMinSlots, else none.
	copySlots    = 4
	copyMinSlots = 2
	// copySegBudget bounds the copy areas of one segment.
	copySegBudget = 16 << 20
	// maxCopySlot bounds a copy slot (a record is checked against it).
	maxCopySlot = 16 << 20
	// copyPage is the alignment of the copy areas and their flag page;
	// copyFlagStride spaces the flags (two lines: no adjacent-line pair).
	copyPage       = 4096
	copyFlagStride = 128
)

// copyAreaBytes is the size of one copy area.
func copyAreaBytes(slots, slotBytes int) int {
	if slots == 0 {
		return 0
	}
	return copyPage + (slots*slotBytes+copyPage-1)&^(copyPage-1)
}

// copyBase is the offset of the first copy area in a segment described
// by info.
func copyBase(info nodeInfo) int {
	return (nodeHdr + info.cap*(ringBytes(info)+medAreaBytes(info.slots, info.slotB)) + copyPage - 1) &^ (copyPage - 1)
}

// copyGeometry returns the copy slots per area and the bytes per slot
// for a segment of n rings: WEFT_TUNE's nodecopyslot rounded up to 64
// bytes, copySlots slots, halved until n areas fit in copySegBudget; none
// when nodecopy is 0 or fewer than copyMinSlots fit.
func copyGeometry(n int) (slots, slotBytes int) {
	if tune.NodeCopy <= 0 || n < 1 {
		return 0, 0
	}
	slotBytes = (int(tune.NodeCopySlot) + 63) &^ 63
	slots = copySlots
	for slots >= copyMinSlots && n*copyAreaBytes(slots, slotBytes) > copySegBudget {
		slots /= 2
	}
	if slots < copyMinSlots {
		return 0, 0
	}
	return slots, slotBytes
}

// newCopyArea returns the copy area of ring i of a segment described by
// info and mapped at mem, or nil when the segment has none.
func newCopyArea(info nodeInfo, mem []byte, i int) *medArea {
	if info.cslots == 0 {
		return nil
	}
	sz := copyAreaBytes(info.cslots, info.cslotB)
	o := copyBase(info) + i*sz
	return &medArea{mem: mem[o : o+sz : o+sz], slots: info.cslots, size: info.cslotB, fstride: copyFlagStride, doff: copyPage}
}

// nodeCopyFits reports whether a message of n bytes goes to l by the
// pipelined copy: on here (the peer's segment having a copy area says it
// is on there), another process, at least nodecopy bytes and above the
// eager limit (up to it a send completes at once), no copy of the pair in
// progress and nothing queued before it.
func (v *vci) nodeCopyFits(l *nodeLink, n int) bool {
	cp := int(tune.NodeCopy)
	return cp > 0 && l.cpOut != nil && !l.local && !v.crowded && l.cout == nil && n >= cp && n > v.eagerLimit && n <= nodeCopyMax && len(v.sendq) == 0
}

// nodeCopyTakes reports whether a send of n bytes to l goes by the
// pipelined copy: it fits (nodeCopyFits), and either the caller waits
// for it at once (blocking: Send, SendTyped) or it completes within the
// call that starts it (copyRoom). An Isend that would not complete takes
// another path: its later fragments would wait for the sender to drive
// its endpoint, where a rendezvous's receiver copies the whole message
// itself. typed: a typed message (copyFragTyped).
func (v *vci) nodeCopyTakes(l *nodeLink, n int, blocking, typed bool) bool {
	if !v.nodeCopyFits(l, n) {
		return false
	}
	if blocking {
		return true
	}
	f := copyFrag(l.cpOut, n)
	if typed {
		f = copyFragTyped(l.cpOut, n)
	}
	return l.copyRoom(n, f)
}

// copyRoom reports whether the free slots of l's copy area, from the
// next one on, hold n bytes: a send of n bytes by the pipelined copy
// then completes within the call that starts it.
func (l *nodeLink) copyRoom(n, f int) bool {
	a := l.cpOut
	need := (n + f - 1) / f
	if need > a.slots {
		return false
	}
	for j := 0; j < need; j++ {
		if atomic.LoadUint64(a.flag((a.next+j)%a.slots)) != 0 {
			return false
		}
	}
	return true
}

// nodeSendCopy sends buf to rank dest of c over l by the pipelined copy,
// timed for l.way from t0. ok is false when the ring is full (nothing
// was sent). Caller holds the lock.
func (v *vci) nodeSendCopy(c *Comm, l *nodeLink, t uint64, aux uint32, buf []byte, dest int, t0 time.Time) (r *Request, ok bool) {
	o := &l.coutMem // free: l.cout is nil (nodeCopyFits)
	*o = copyOut{buf: buf, n: len(buf), frag: copyFrag(l.cpOut, len(buf)), t0: t0}
	return v.nodeSendCopyOut(c, l, t, aux, o, dest)
}

// nodeSendCopyTyped is nodeSendCopy of a typed message of layout u,
// packed fragment by fragment straight into the slots (the receiver
// unpacks straight out of them): the pack is the copy in.
func (v *vci) nodeSendCopyTyped(c *Comm, l *nodeLink, t uint64, aux uint32, u *typedRecv, dest int) (r *Request, ok bool) {
	l.coutU = *u // packed after the call returns; free as l.coutMem is
	now := time.Now()
	stream := l.fill.Pick(u.n, now) == fillStream
	o := &l.coutMem
	*o = copyOut{u: &l.coutU, n: u.n, frag: copyFragTyped(l.cpOut, u.n), t0: now, stream: stream}
	return v.nodeSendCopyOut(c, l, t, aux, o, dest)
}

// nodeSendCopyOut starts pipelined send o over l (see nodeSendCopy).
func (v *vci) nodeSendCopyOut(c *Comm, l *nodeLink, t uint64, aux uint32, o *copyOut, dest int) (r *Request, ok bool) {
	a := l.cpOut
	var h [medHdrSize]byte
	binary.LittleEndian.PutUint32(h[0:], copyMagic)
	binary.LittleEndian.PutUint32(h[4:], uint32(a.next)|uint32(o.frag/fragUnit)<<8)
	binary.LittleEndian.PutUint64(h[8:], uint64(o.n))
	if ok, err := l.out.TrySendAux(t|rtsBit, aux, h[:]); !ok || err != nil {
		return nil, false
	}
	o.slot = a.next
	l.cout = o
	if v.pumpCopyOut(l) {
		if l.broken != nil { // a typed send's pack failed: the caller reports the link's error
			return nil, false
		}
		return completedRequest, true
	}
	o.r = v.newSend(c, kSendEager, o.buf, dest)
	return o.r, true
}

// A typed send's fragments go into the copy slots one of two ways:
// packed straight into the slot (plain stores), or packed into private
// memory and streamed in (memcopy.Stream: non-temporal stores). A plain
// store into a line the receiver's core read last takes the line back
// from that core: cheap where the two cores share a cache, where the
// receiver then finds the data in that cache (a typed FFT2 transpose of
// 1 MiB 52–56 µs against 141 streamed), and many times slower where they
// do not (two sockets; a virtual machine whose vCPUs the host placed
// apart: 504 µs against 154–166), where non-temporal stores do not wait
// for the lines; but on some processors non-temporal stores run at half
// the speed of plain ones, and the streamed lines cost the receiver's
// unpack a read from memory. Which is faster depends on the machine and,
// on some virtual machines, on where the host runs the vCPUs, minutes
// apart, so each link times its typed pipelined sends both ways, from
// their start until the receiver has freed the slot of the last fragment
// (nodeway.go), per size class, and takes the faster (l.fill,
// internal/choose). A contiguous send's fragments always stream: its
// link chooses between the pipelined copy and the receiver's single copy
// instead (nodeway.go).
const (
	fillPlain  = 0 // packed straight into the slot
	fillStream = 1 // packed privately, then streamed into the slot
)

// fillFragment puts fragment dst of o (bytes o.off on) into its slot:
// streamed for a contiguous send, the way o.stream says for a typed one.
func (v *vci) fillFragment(o *copyOut, dst []byte) error {
	k := len(dst)
	switch {
	case o.u == nil:
		memcopy.Stream(dst, o.buf[o.off:o.off+k])
		return nil
	case !o.stream:
		return o.u.pack(o.off, dst)
	}
	s := v.fillScratch(k)
	if err := o.u.pack(o.off, s); err != nil {
		return err
	}
	memcopy.Stream(dst, s)
	return nil
}

// fillScratch returns v's private buffer for a fragment of k bytes.
func (v *vci) fillScratch(k int) []byte {
	if len(v.cpScratch) < k {
		v.cpScratch = make([]byte, k)
	}
	return v.cpScratch[:k]
}

// pumpCopyOut copies the next fragments of l's pipelined send into the
// slots the receiver has freed; true when the send is complete (or has
// failed, its request finished with the error).
func (v *vci) pumpCopyOut(l *nodeLink) bool {
	o, a := l.cout, l.cpOut
	moved := false
	// At most one round of the slots per call: progress also serves the
	// endpoint's other work, and Isend returns after the first round.
	for k := 0; k < a.slots && o.off < o.n; k++ {
		f := a.flag(o.slot)
		if atomic.LoadUint64(f) != 0 {
			break
		}
		if l.way.pipeN != 0 {
			v.pipeCheck(l, o.slot)
		}
		k := min(o.frag, o.n-o.off)
		if err := v.fillFragment(o, a.slot(o.slot)[:k]); err != nil {
			// A typed send's pack failed. The receiver waits for bytes
			// that will not come: the link goes, as after a peer's
			// failure.
			err = fmt.Errorf("pack %s: %w", o.u, err)
			l.cout, l.broken = nil, err
			v.log.Error("node transport: pipelined send failed; link to this peer dropped", "member", l.member, "err", err)
			if o.r != nil {
				v.finish(o.r, fmt.Errorf("endpoint: send to rank %d: %w", o.r.qrank, err))
			}
			return true
		}
		release.Store(f, 1)
		a.frags++
		o.off += k
		o.slot = (o.slot + 1) % a.slots
		moved = true
	}
	if o.off == o.n {
		a.next = o.slot
		a.copies++
		l.cout = nil
		if !o.t0.IsZero() {
			l.way.pipeDone(o, (o.slot+a.slots-1)%a.slots)
		}
		if o.r != nil {
			v.finish(o.r, nil)
		}
		return true
	}
	if moved {
		o.moved()
		return false
	}
	if err := o.check(l, v.timeout, "pipelined send", o.off, o.n); err != nil {
		l.cout = nil
		l.broken = err
		v.log.Error("node transport: pipelined send failed; link to this peer dropped", "member", l.member, "err", err)
		if o.r != nil {
			v.finish(o.r, fmt.Errorf("endpoint: send to rank %d: %w", o.r.qrank, err))
		}
		return true
	}
	return false
}

// nodeCopyStart takes the pipelined copy header at the head of l's ring
// (fields of h): the message goes into the first matching posted receive,
// else into an unexpected buffer, as its fragments arrive.
func (v *vci) nodeCopyStart(l *nodeLink, t uint64, aux uint32, field uint32, size uint64) {
	a := l.cpIn
	slot, frag := int(field&0xff), int(field>>8)*fragUnit
	if slot >= a.slots || size > uint64(nodeCopyMax) || size == 0 || frag <= 0 || frag > a.size {
		err := fmt.Errorf("endpoint: node copy header corrupt (slot %d, fragments of %d bytes, %d bytes): %w", slot, frag, size, ErrInvalid)
		l.broken = err
		v.log.Error("node transport: link to this peer dropped", "member", l.member, "err", err)
		return
	}
	t &^= rtsBit
	in := &l.cinMem // free: l.cin is nil (pollNode takes no message while it is not)
	*in = copyIn{t: t, aux: aux, size: int(size), frag: frag, slot: slot}
	for r := v.posted.head; r != nil; r = r.qnext {
		if tagMatches(t, r.want, r.ignore) {
			v.posted.remove(r)
			r.state = stReading // matched: Cancel leaves it alone
			r.st = Status{Source: tagSource(t), Tag: tagUser(t), Count: min(int(size), r.capacity())}
			in.r, in.reject = r, checkSigWord(r, aux, size)
			if in.reject != nil {
				r.st.Count = 0
			}
			break
		}
	}
	if in.r == nil {
		in.data = v.smallBuf(int(size))
	}
	l.cin = in
	v.pumpCopyIn(l)
}

// copyFrag is the fragment size of a contiguous pipelined message of n
// bytes over copy area a: a slot, or for a message of fewer than
// copyMinFrags slots n/copyMinFrags rounded up to whole pages (at least
// copyFragMin), so that a message of one slot or less still goes in
// fragments whose copy in and copy out overlap (a 256 KiB message in one
// fragment waited for the whole copy in before its copy out began;
// docs/perf/endpoint.md). The header tells the receiver the size.
func copyFrag(a *medArea, n int) int {
	f := (n + copyMinFrags - 1) / copyMinFrags
	f = (f + copyPage - 1) &^ (copyPage - 1)
	return min(a.size, max(f, copyFragMin))
}

// copyFragTyped is copyFrag for a typed message: one shorter than
// copyMinFrags fragments of copyFragMin goes whole, as one fragment, a
// longer one in copyFrag's fragments. Each fragment is a partial pack
// and unpack, where the layout's unit is the whole message (LAMMPS's
// struct of index lists, unrolled into one body) finished by the JIT's
// Go walker: cut into a fragment of 16 KiB and a short one, messages of
// 18–24 KB took up to 1.1–1.4× the time of one fragment (small blocks,
// and LAMMPS's receive layout of four large ones alike), where from
// 64 KiB the overlap of pack and unpack gains 10–25% (docs/perf/typed.md).
func copyFragTyped(a *medArea, n int) int {
	if n < copyMinFrags*copyFragMin {
		return a.size
	}
	return copyFrag(a, n)
}

const (
	copyMinFrags = 4
	copyFragMin  = 16 << 10
	// fragUnit is the unit of the fragment size in a copy header's slot
	// word (bits 8 on): slots are whole multiples of it.
	fragUnit = 64
)

// nodeCopyMax bounds the size a copy header may announce (a corrupt one
// must not make the receiver allocate without limit).
const nodeCopyMax = 1 << 30

// pumpCopyIn copies the fragments the sender has put in the slots out of
// them; true when the message is complete (or has failed).
func (v *vci) pumpCopyIn(l *nodeLink) bool {
	in, a := l.cin, l.cpIn
	moved := false
	for k := 0; k < a.slots && in.off < in.size; k++ {
		f := a.flag(in.slot)
		if atomic.LoadUint64(f) == 0 {
			break
		}
		k := min(in.frag, in.size-in.off)
		v.copyFragment(in, a.slot(in.slot)[:k])
		release.Store(f, 0)
		in.off += k
		in.slot = (in.slot + 1) % a.slots
		moved = true
	}
	if in.off == in.size {
		l.cin = nil
		v.copyDone(in)
		return true
	}
	if moved {
		in.moved()
		return false
	}
	if err := in.check(l, v.timeout, "pipelined message", in.off, in.size); err != nil {
		l.cin = nil
		l.broken = err
		v.log.Error("node transport: pipelined message lost; link to this peer dropped", "member", l.member, "err", err)
		if in.r != nil {
			v.finish(in.r, err)
		}
		return true
	}
	return false
}

// copyFragment takes fragment b (bytes in.off on) of in's message.
func (v *vci) copyFragment(in *copyIn, b []byte) {
	switch {
	case in.r == nil:
		copy(in.data[in.off:], b)
	case in.reject == nil:
		in.r.take(in.off, b) // drops what is past the receive's capacity
	}
}

// copyDone completes in's message: its receive, or, for one that came
// unexpected, the first matching receive posted since, else the
// unexpected queue.
func (v *vci) copyDone(in *copyIn) {
	if r := in.r; r != nil {
		var err error
		switch c := r.capacity(); {
		case in.reject != nil:
			err = in.reject
		case in.size > c:
			err = fmt.Errorf("endpoint: message of %d bytes from rank %d into %d: %w", in.size, r.st.Source, c, ErrTruncated)
		}
		v.finish(r, err)
		return
	}
	for r := v.posted.head; r != nil; r = r.qnext {
		if tagMatches(in.t, r.want, r.ignore) {
			v.posted.remove(r)
			if err := checkSigWord(r, in.aux, uint64(in.size)); err != nil {
				r.st = Status{Source: tagSource(in.t), Tag: tagUser(in.t)}
				v.finish(r, err)
			} else {
				v.deliver(r, in.t, in.data)
			}
			return
		}
	}
	v.appendUnexpected(unexp{tag: in.t, data: in.data, sig: in.aux})
}
