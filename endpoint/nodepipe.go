package endpoint

// Pipelined typed sends over the node transport. A typed message above
// the eager limit that must be packed is packed into a staging buffer of
// the sending endpoint, as the staged rendezvous does, but the header
// goes first and the buffer is filled a piece (WEFT_TUNE nodepipe) at a
// time: after each piece the sender stores how far it has packed in the
// pipeline word of its own segment, which the receiver maps. The
// receiver, once it has matched the header, copies each packed piece
// with process_vm_readv and unpacks it while the sender packs the next,
// so the pack on one core overlaps the copy and unpack on the other. The
// send is still complete when IsendTyped returns (the whole message is
// packed by then); the staging buffer is recycled on the FIN.

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/cma"
	"github.com/weft-hpc/weft/internal/peerwatch"
	"github.com/weft-hpc/weft/internal/wait"
)

const (
	// pipeBit in a node rendezvous header's key: the sender is still
	// packing; its pipeline word says how far.
	pipeBit = uint64(1) << 62
	// The pipeline word: the low npSeqBits of the send's sequence
	// number above npOffBits bits of packed offset.
	npOffBits = 40
	npSeqBits = 64 - npOffBits
	npOffMask = 1<<npOffBits - 1
	npSeqMask = 1<<npSeqBits - 1
	// npFailed as the offset: the sender's pack failed.
	npFailed = npOffMask
)

// pipePieceHook, when set (by tests, before any send), runs after each
// piece a pipelined send has packed and published: off bytes of n.
var pipePieceHook func(off, n int)

// nodePipeChunk is the piece a pipelined send packs between two marks.
func nodePipeChunk() int { return int(tune.NodePipe) }

// nodePiped reports whether a packed typed message of n bytes to l goes
// by the pipelined rendezvous: another process, at least two pieces.
func (v *vci) nodePiped(l *nodeLink, n int) bool {
	k := nodePipeChunk()
	return k > 0 && !l.local && l.peerHdr != nil && n > v.eagerLimit && n >= 2*k && n < npFailed
}

// setPipeWord publishes that send seq has packed its first off bytes.
func (v *vci) setPipeWord(seq uint64, off uint64) {
	p := (*uint64)(unsafe.Pointer(&v.seg.Bytes()[offPipe]))
	atomic.StoreUint64(p, (seq&npSeqMask)<<npOffBits|off)
}

// nodePipeSend sends layout u (n = len(b) bytes, b a staging buffer of
// v's) to rank dest over l with match word w and type signature hash sig:
// header first, then the pack, a piece at a time, each published through
// the pipeline word. Caller holds the lock.
func (v *vci) nodePipeSend(c *Comm, l *nodeLink, u *typedRecv, b []byte, w uint64, dest int, sig uint64) error {
	r, err := v.nodeRdv(c, l, b, w, dest, true, pipeBit, sig)
	if err != nil {
		v.unstage(b)
		return err
	}
	k := nodePipeChunk()
	for off := 0; off < len(b); {
		m := min(k, len(b)-off)
		if err := u.pack(off, b[off:off+m]); err != nil {
			v.setPipeWord(r.seq, npFailed) // the receiver fails; the FIN recycles b
			return fmt.Errorf("endpoint: pack %s: %w", u.String(), err)
		}
		off += m
		v.setPipeWord(r.seq, uint64(off))
		if pipePieceHook != nil {
			pipePieceHook(off, len(b))
		}
	}
	return nil
}

// nodePipeRead serves receive r (n bytes of it; typed: unpacked into its
// layout) from pipelined header h over l, a piece as soon as the sender
// has packed it.
func (v *vci) nodePipeRead(r *Request, l *nodeLink, h rdvHeader, n int, typed bool) error {
	if typed && v.chunk == nil {
		v.chunk = make([]byte, chunkBytes)
	}
	var w pipeWait
	for off := 0; off < n; {
		avail, err := w.next(l, h, off, v.timeout)
		if err != nil {
			return err
		}
		k := min(avail, n) - off
		addr := uintptr(h.addr) + uintptr(off)
		if !typed {
			if _, err := cma.Read(l.pid, r.buf[off:off+k], addr); err != nil {
				return err
			}
			off += k
			continue
		}
		k = min(k, len(v.chunk))
		if _, err := cma.Read(l.pid, v.chunk[:k], addr); err != nil {
			return err
		}
		r.take(off, v.chunk[:k])
		off += k
	}
	return nil
}

// pipeWait waits for a pipelined sender's progress.
type pipeWait struct {
	start time.Time
	pace  peerwatch.Pacer
}

// pipePolicy paces a wait for a pipelined sender: 4096 polls of the
// pipeline word, then a yield per poll, every fourth to other processes
// (the sender may need this core on a crowded node).
var pipePolicy = wait.Policy{Name: "endpoint-pipe", SpinPolls: 1 << 12, YieldEvery: 1, OSYieldEvery: 4}

// next returns how many bytes of h's message the sender has packed once
// that is more than off. It fails when the sender reports a failed pack,
// its process is gone (checked every peerwatch.Interval by a one-byte
// read from it), or nothing moves for timeout.
func (w *pipeWait) next(l *nodeLink, h rdvHeader, off int, timeout time.Duration) (int, error) {
	p := (*uint64)(unsafe.Pointer(&l.peerHdr[offPipe]))
	for spins := 0; ; spins++ {
		word := atomic.LoadUint64(p)
		if word>>npOffBits != h.seq&npSeqMask {
			return int(h.size), nil // packed whole: the sender has moved on
		}
		a := word & npOffMask
		if a == npFailed {
			return 0, fmt.Errorf("endpoint: the sender failed to pack its typed message: %w", errs.ErrInvalid)
		}
		if int(a) > off {
			w.start = time.Time{}
			return int(a), nil
		}
		if !pipePolicy.Idle(nil, spins) || spins%256 != 0 {
			continue
		}
		if w.start.IsZero() {
			w.start = time.Now()
		} else if time.Since(w.start) > timeout {
			return 0, fmt.Errorf("endpoint: pipelined message stalled at %d of %d bytes for %v: %w", off, h.size, timeout, errs.ErrTimeout)
		}
		if w.pace.Due() {
			var one [1]byte
			if _, err := cma.Read(l.pid, one[:], uintptr(h.addr)); err != nil {
				return 0, err
			}
		}
	}
}
