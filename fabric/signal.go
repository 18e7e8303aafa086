package fabric

/*
#include "shim.h"
#cgo noescape weft_cq_signals
#cgo nocallback weft_cq_signals
#cgo noescape weft_sig_apply
#cgo nocallback weft_sig_apply
*/
import "C"

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Signals in remote CQ data.
//
// A put-with-signal can travel as ONE RMA write: the data, with the signal
// in the write's 64 bits of remote CQ data (InjectWriteDataOp,
// WriteDataOp, WriteMsgOp with OpRemoteCQData). The provider generates the
// target's completion only once the data has been placed, so a signal the
// target stores when it reads that completion can never be seen before its
// data. A SignalSink describes the target memory such signals land in;
// CQ.ReadSignals and CQ.WaitWordSignals read a CQ like CQ.Read and
// CQ.WaitWord and, in the same cgo call, store every signal they read into
// the sink's memory instead of returning it.
//
// Encoding (64 bits of CQ data; a slot is an 8-byte word of the sink's
// memory, slot = byte offset / 8, and S = SignalSlotBits(len(memory))):
//
//	bits 63..62 = 10  set:   bits 61..62-S slot, bits 61-S..0 value
//	                         (values below 2^(62-S): EncodeSignal)
//	bits 63..62 = 11  part:  bits 61..60 = 0 high half, 1 low half, 2 commit
//	                  halves: bits 59..32 origin, bits 31..0 that half of the value
//	                  commit: bits 59..S origin, bits S-1..0 slot
//	bits 63..62 = 0x  not a signal
//
// A value too large for one word goes as three parts from one origin, in
// order (EncodeSignalParts); the target stages the halves per origin and
// stores the value at the commit. Parts of different origins may
// interleave. Anything that is not a valid signal for the sink (another
// bit pattern, a slot or origin out of range, a commit without both
// halves) is not applied and is returned like any other completion, with
// CompRemoteCQData set, for the caller to report.

// MaxSignalSlotBits bounds SignalSlotBits: sink memory of at most 8 TiB.
const MaxSignalSlotBits = 40 // WEFT_SIG_MAX_SLOT_BITS in shim.h

// maxSignalOrigins bounds the origins of parts (28 bits).
const maxSignalOrigins = 1 << 28

// SignalSlotBits is the number of slot bits of the encoding for sink
// memory of size bytes: enough for every 8-byte word in it.
func SignalSlotBits(size int) int {
	if size < 16 {
		return 0
	}
	return bits.Len64(uint64(size/8 - 1))
}

// SignalValueBits is how many bits a value may have to travel in one CQ
// data word (EncodeSignal) with slotBits slot bits.
func SignalValueBits(slotBits int) int { return 62 - slotBits }

func signalSlot(slotBits, off int) (uint64, bool) {
	if slotBits < 0 || slotBits > MaxSignalSlotBits || off < 0 || off%8 != 0 {
		return 0, false
	}
	slot := uint64(off) / 8
	if slot>>uint(slotBits) != 0 {
		return 0, false
	}
	return slot, true
}

// EncodeSignal returns the CQ data that stores value into the 8-byte word
// at byte offset off of a sink with slotBits slot bits. ok is false when
// off is not a non-negative multiple of 8 addressable with slotBits bits,
// or value has more than SignalValueBits(slotBits) bits (use
// EncodeSignalParts).
func EncodeSignal(slotBits, off int, value uint64) (data uint64, ok bool) {
	slot, ok := signalSlot(slotBits, off)
	vb := uint(SignalValueBits(slotBits))
	if !ok || value>>vb != 0 {
		return 0, false
	}
	return 2<<62 | slot<<vb | value, true
}

// EncodeSignalParts returns the three CQ data words (high half, low half,
// commit) that store any value into the word at byte offset off of a sink
// with slotBits slot bits, sent from origin (the sender's index in the
// sink's origins). They must reach the target in this order (one
// endpoint, write-after-write ordering). ok is false for a bad offset (as
// for EncodeSignal) or an origin that does not fit (negative, ≥ 2^28, or
// ≥ 2^(60-slotBits)).
func EncodeSignalParts(slotBits, origin, off int, value uint64) (parts [3]uint64, ok bool) {
	slot, ok := signalSlot(slotBits, off)
	if !ok || origin < 0 || origin >= maxSignalOrigins || uint64(origin)>>uint(60-slotBits) != 0 {
		return parts, false
	}
	o := uint64(origin)
	parts[0] = 3<<62 | 0<<60 | o<<32 | value>>32
	parts[1] = 3<<62 | 1<<60 | o<<32 | value&0xffffffff
	parts[2] = 3<<62 | 2<<60 | o<<uint(slotBits) | slot
	return parts, true
}

// SignalSink is the memory remote-CQ-data signals are stored into, for
// CQ.ReadSignals, CQ.WaitWordSignals and SignalSink.Apply, and the staging
// of signals sent in parts. One goroutine at a time may use a sink.
type SignalSink struct {
	mem      []byte
	slotBits int
	stage    []uint64 // per origin: high half, low half (bit 32: present)
	applied  atomic.Uint64
}

// NewSignalSink makes a sink over mem, which must be 8-byte aligned and is
// the memory peers address signals to (slot 0 is mem[0:8]): registered
// memory of a Domain.Alloc buffer, mmap'd memory, or Go memory that stays
// pinned (Domain.Register) while the sink is used. C writes it only during
// the sink's calls. origins is how many senders may send signals in parts
// (their indices are 0..origins-1). mem longer than 8 << MaxSignalSlotBits
// bytes, or more origins than the encoding can name, fail with ErrInvalid.
func NewSignalSink(mem []byte, origins int) (*SignalSink, error) {
	if len(mem) < 8 || uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%8 != 0 {
		return nil, fmt.Errorf("fabric: NewSignalSink: memory of %d bytes, not 8-byte aligned or shorter than one word: %w", len(mem), ErrInvalid)
	}
	sb := SignalSlotBits(len(mem))
	if sb > MaxSignalSlotBits {
		return nil, fmt.Errorf("fabric: NewSignalSink: %d bytes need %d slot bits (at most %d): %w", len(mem), sb, MaxSignalSlotBits, ErrInvalid)
	}
	if origins < 1 || origins > maxSignalOrigins || uint64(origins-1)>>uint(60-sb) != 0 {
		return nil, fmt.Errorf("fabric: NewSignalSink: %d origins do not fit the encoding with %d slot bits: %w", origins, sb, ErrInvalid)
	}
	return &SignalSink{mem: mem, slotBits: sb, stage: make([]uint64, 2*origins)}, nil
}

// SlotBits is the sink's SignalSlotBits, which senders encode with.
func (s *SignalSink) SlotBits() int { return s.slotBits }

// Applied counts the signals stored so far.
//
// It may be read while another goroutine polls a CQ into the sink (a
// blocked call of another layer driving this one's progress).
func (s *SignalSink) Applied() uint64 { return s.applied.Load() }

// args are the sink's C arguments: memory, slots, slot bits, stage, origins.
func (s *SignalSink) args() (*C.uint64_t, C.uint64_t, C.int, *C.uint64_t, C.uint64_t) {
	return (*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(s.mem))), C.uint64_t(len(s.mem) / 8), C.int(s.slotBits),
		(*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(s.stage))), C.uint64_t(len(s.stage) / 2)
}

// Apply stores the valid signals among c (completions read by other means,
// in the order they were read) and moves the other completions, in order,
// to the front of c; it returns how many those are.
func (s *SignalSink) Apply(c []Completion) int {
	if len(c) == 0 {
		return 0
	}
	mem, nslots, sb, stage, norig := s.args()
	var applied C.uint64_t
	k := C.weft_sig_apply((*C.struct_weft_comp)(unsafe.Pointer(&c[0])), C.size_t(len(c)), mem, nslots, sb, stage, norig, &applied)
	if applied != 0 {
		s.applied.Add(uint64(applied))
	}
	return int(k)
}

var (
	errSigNilSink = fmt.Errorf("fabric: CQ signals: nil sink: %w", ErrInvalid)
	errSigNoOut   = fmt.Errorf("fabric: CQ signals: empty completion slice: %w", ErrInvalid)
)

// ReadSignals is CQ.ReadSpin that stores the signals it reads into s (they
// are not returned in out): each read is repeated until the provider has
// no more completions queued (a read returns fewer than asked for) or out
// is full, so every signal the provider has delivered so far is stored
// when it returns n < min(len(out), 64). It returns once it stored a
// signal or read another completion or an error, or after spins empty
// rounds. out must not be empty.
func (c *CQ) ReadSignals(s *SignalSink, out []Completion, spins int) (n int, err error) {
	_, n, err = c.signals(s, nil, 0, out, spins)
	return n, err
}

// WaitWordSignals is CQ.WaitWord that stores the signals it reads into s,
// as ReadSignals: word may be one of the sink's slots, set by a signal
// during the call. It returns when the word is at least want, when other
// completions or an error were read, or after spins rounds.
func (c *CQ) WaitWordSignals(s *SignalSink, word *uint64, want uint64, out []Completion, spins int) (reached bool, n int, err error) {
	if word == nil {
		return false, 0, errWaitNilWord
	}
	if uintptr(unsafe.Pointer(word))&7 != 0 {
		return false, 0, errWaitAlign
	}
	return c.signals(s, word, want, out, spins)
}

func (c *CQ) signals(s *SignalSink, word *uint64, want uint64, out []Completion, spins int) (bool, int, error) {
	if gone(c.handle()) {
		return false, 0, closeds[opCQRead]
	}
	if s == nil {
		return false, 0, errSigNilSink
	}
	if len(out) == 0 {
		return false, 0, errSigNoOut
	}
	mem, nslots, sb, stage, norig := s.args()
	var applied C.uint64_t
	var ret C.int64_t
	if f := c.enter(spins); f != nil {
		a := &f.args
		a.mem, a.nslots, a.slot_bits = C.uintptr_t(uintptr(unsafe.Pointer(mem))), C.uint64_t(nslots), C.int64_t(sb)
		a.stage, a.norigins, a.applied = C.uintptr_t(uintptr(unsafe.Pointer(stage))), C.uint64_t(norig), 0
		a.word, a.want = C.uintptr_t(uintptr(unsafe.Pointer(word))), C.uint64_t(want)
		f.fastOut(c.fid, out, spins)
		ret = C.int64_t(f.run(C.WEFT_FAST_CQ_SIGNALS))
		applied = a.applied
		f.state.Store(fastFree)
		runtime.KeepAlive(s)
		runtime.KeepAlive(word)
		runtime.KeepAlive(out)
	} else {
		comp, cnt := compArg(out)
		ret = C.weft_cq_signals(C.uintptr_t(c.fid), mem, nslots, sb, stage, norig, &applied,
			(*C.uint64_t)(unsafe.Pointer(word)), C.uint64_t(want), comp, cnt, spinArg(spins), c.pace)
	}
	if applied != 0 {
		s.applied.Add(uint64(applied))
	}
	if ret >= 0 {
		return ret>>32 != 0, int(ret & 0xffffffff), nil
	}
	reached := word != nil && atomic.LoadUint64(word) >= want
	if ret == -C.FI_EAGAIN {
		return reached, 0, nil
	}
	return reached, 0, c.readFail(int(-ret))
}
