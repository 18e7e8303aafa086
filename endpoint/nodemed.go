package endpoint

// Medium messages of the node transport: copy in, copy out through a
// per-pair slot area.
//
// Next to its rings, an endpoint's segment holds one slot area per ring
// (per sending member): a control line of one word per slot, then the
// slots, each of the medium limit rounded up to 64 bytes:
//
//	0                 flags[medMaxSlots] uint64: 1 = the slot holds a
//	                  message the owner has not copied out yet
//	64 + i*slotBytes  slot i
//
// A message longer than the ring's inline limit and at most the slot size
// is copied by its sender into a free slot in one contiguous copy; the
// sender marks the slot busy and pushes a 16-byte header (magic, slot,
// size) through the ring as an rts message, with the folded type
// signature (sigWord) in the cell's aux word as an inline message has it,
// so it matches and orders like any message of the pair. The receiver matches on the header's match
// word, copies the payload out of the slot in one contiguous copy (into
// the user's buffer, or into an unexpected buffer when no receive is
// posted) and frees the slot with one release store. Only the sender sets
// a flag and only the receiver clears one, so the area needs no lock and
// no atomic read-modify-write. A sender that finds every slot busy, or
// the ring full, sends by rendezvous instead (node.go), behind the same
// ring, so the order of the pair holds.

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/weft-hpc/weft/internal/memcopy"
	"github.com/weft-hpc/weft/internal/release"
	"github.com/weft-hpc/weft/internal/shmring"
)

const (
	// medMaxSlots bounds the slots of one area: their flags fill one line.
	medMaxSlots = 8
	// medSlots is the number of slots of an area when the segment has room.
	medSlots = 4
	// medSegBudget bounds the slot areas of one segment: with many
	// endpoints on a node, areas get fewer slots, then none.
	medSegBudget = 4 << 20
	// medHdrSize is the size of a medium header in the ring; it differs
	// from rdvHeaderSize, which tells the two rts messages apart.
	medHdrSize = 16
	medMagic   = 0x6d646577 // "wedm"
)

// A medium header must not be mistaken for a rendezvous header.
var _ [rdvHeaderSize - medHdrSize - 1]struct{}

// medGeometry returns the slots per area and the bytes per slot for a
// segment of n rings whose inline limit is inline: WEFT_TUNE's nodemedium
// rounded up to 64 bytes, medSlots slots, halved until n areas fit in
// medSegBudget; none when the limit does not exceed inline.
func medGeometry(n, inline int) (slots, slotBytes int) {
	lim := int(tune.NodeMedium)
	if lim <= inline || n < 1 {
		return 0, 0
	}
	slotBytes = (lim + 63) &^ 63
	slots = medSlots
	for slots > 0 && n*medAreaBytes(slots, slotBytes) > medSegBudget {
		slots /= 2
	}
	if slots == 0 {
		return 0, 0
	}
	return slots, slotBytes
}

// medAreaBytes is the size of one slot area.
func medAreaBytes(slots, slotBytes int) int {
	if slots == 0 {
		return 0
	}
	return 64 + slots*slotBytes
}

// medArea is one slot area, seen by its sender or by its receiver.
type medArea struct {
	mem   []byte
	slots int
	size  int // bytes per slot: the largest medium message
	// A copy area (nodecopy.go) spaces its flags fstride bytes apart and
	// starts its slots at doff; a medium area packs them into its first
	// line (fstride 0: 8 bytes, doff 0: 64).
	fstride, doff int
	next          int   // sender: the slot tried first
	sent          int64 // sender: messages sent through the slots
	busy          int64 // sender: medium messages that found every slot busy
	// copies counts the sender's pipelined copies (a copy area,
	// nodecopy.go).
	copies int64
	// frags counts the fragments of those copies.
	frags int64
}

// newMedArea returns the area of ring i of a segment described by info
// and mapped at mem, or nil when the segment has none.
func newMedArea(info nodeInfo, mem []byte, i int) *medArea {
	if info.slots == 0 {
		return nil
	}
	sz := medAreaBytes(info.slots, info.slotB)
	o := nodeHdr + info.cap*ringBytes(info) + i*sz
	return &medArea{mem: mem[o : o+sz : o+sz], slots: info.slots, size: info.slotB}
}

func (a *medArea) flag(i int) *uint64 {
	if a.fstride != 0 {
		return (*uint64)(unsafe.Pointer(&a.mem[a.fstride*i]))
	}
	return (*uint64)(unsafe.Pointer(&a.mem[8*i]))
}

func (a *medArea) slot(i int) []byte {
	o := 64 + i*a.size
	if a.doff != 0 {
		o = a.doff + i*a.size
	}
	return a.mem[o : o+a.size : o+a.size]
}

// nodeSendMedium sends buf (inline limit < len ≤ slot size) through a free
// slot of l; false when no slot is free or the ring is full (nothing was
// sent). Caller holds the lock and v.sendq is empty.
func (v *vci) nodeSendMedium(l *nodeLink, t uint64, aux uint32, buf []byte) bool {
	a := l.medOut
	for k := 0; k < a.slots; k++ {
		i := (a.next + k) % a.slots
		f := a.flag(i)
		if atomic.LoadUint64(f) != 0 {
			continue
		}
		memcopy.Shared(a.slot(i), buf) // streamed from 8 KiB
		*f = 1                         // published by the ring's release store below
		var h [medHdrSize]byte
		binary.LittleEndian.PutUint32(h[0:], medMagic)
		binary.LittleEndian.PutUint32(h[4:], uint32(i))
		binary.LittleEndian.PutUint64(h[8:], uint64(len(buf)))
		if ok, err := l.out.TrySendAux(t|rtsBit, aux, h[:]); !ok || err != nil {
			*f = 0 // never published: the receiver cannot have seen it
			return false
		}
		a.next = i + 1
		a.sent++
		return true
	}
	a.busy++
	return false
}

// isMedium reports whether the ring message of n bytes with match word t
// is a medium header.
func isMedium(l *nodeLink, t uint64, n int) bool {
	return (l.medIn != nil || l.cpIn != nil) && n == medHdrSize && t&(ctrlBit|rtsBit) == rtsBit
}

// nodeMedium takes the medium header at the head of l's ring: the payload
// goes from its slot into the first matching posted receive, else into an
// unexpected buffer; either way the slot is freed at once.
func (v *vci) nodeMedium(l *nodeLink, t uint64) {
	aux := l.in.Aux()
	var h [medHdrSize]byte
	l.in.TryRecv(h[:])
	a := l.medIn
	i := int(binary.LittleEndian.Uint32(h[4:]))
	n := binary.LittleEndian.Uint64(h[8:])
	if binary.LittleEndian.Uint32(h[0:]) == copyMagic && l.cpIn != nil {
		v.nodeCopyStart(l, t, aux, binary.LittleEndian.Uint32(h[4:]), n)
		return
	}
	if a == nil || binary.LittleEndian.Uint32(h[0:]) != medMagic || i >= a.slots || n > uint64(a.size) {
		v.log.Error("node medium header corrupt; message lost", "member", l.member, "slot", i, "size", n)
		return
	}
	data := a.slot(i)[:n]
	t &^= rtsBit
	for r := v.posted.head; r != nil; r = r.qnext {
		if tagMatches(t, r.want, r.ignore) {
			v.posted.remove(r)
			if err := checkSigWord(r, aux, n); err != nil {
				r.st = Status{Source: tagSource(t), Tag: tagUser(t)}
				v.finish(r, err)
			} else {
				if r.reqExt != nil && r.typed != nil && (len(data) >= memcopy.SharedMin || r.typed.tinyBlocks()) {
					// The sender streamed the slot (memcopy.Shared): its
					// lines are in memory, where an unpack of small blocks
					// waits for each in turn and one copy out streams them
					// (SPECFEM3D cm s, 12 KB: 6.9–7.0 µs against 4.4–4.6;
					// docs/perf/typed.md). Below that its lines are in the
					// sender's cache, and an unpack of blocks of a few
					// bytes still waits for them one by one (SPECFEM3D oc
					// s, 4000 B in 4-byte blocks: 2.4–2.5 µs against
					// 1.7–1.8).
					b := v.inlineScratch(len(data))
					copy(b, data)
					data = b
				}
				v.deliver(r, t, data)
			}
			release.Store(a.flag(i), 0)
			return
		}
	}
	// Unexpected: copied out so that the slot is free for the sender's
	// next message (see RATIONALE.md).
	b := v.medBuf(int(n), a.size)
	copy(b, data)
	release.Store(a.flag(i), 0)
	v.appendUnexpected(unexp{tag: t, data: b, sig: aux})
}

// ringBytes is the size of one ring of a segment described by info.
func ringBytes(info nodeInfo) int { return shmring.Layout(info.cells) }
