package onesided

import (
	"context"
	"fmt"

	"github.com/weft-hpc/weft/internal/checked"
)

// WindowTransport is the one-sided Transport of the seed's third scheme:
// each tile goes with PutSignal straight into the receiver's slot, and the
// receiver polls the slot's signal word. Its buffers live in a window it
// allocates over the group, so they are direct-store shared memory for
// ranks on one node and registered memory for libfabric.
type WindowTransport struct {
	g    Group
	opts []Option
	w    *Window

	tileBytes, sendSlots, recvSlots int
	stride                          int // bytes between tile buffers
	sigOff, recvOff, sendOff        int
	issued                          []uint64 // per send slot: net op count after its sends
}

// NewWindowTransport returns a transport over g; its window is allocated by
// the first Prepare (so by NewPipeline). opts apply to that window.
func NewWindowTransport(g Group, opts ...Option) *WindowTransport {
	return &WindowTransport{g: g, opts: opts}
}

// Rank implements Transport (-1 for a nil transport or group).
func (t *WindowTransport) Rank() int {
	if t == nil || t.g == nil {
		return -1
	}
	return t.g.Rank()
}

// Size implements Transport (0 for a nil transport or group).
func (t *WindowTransport) Size() int {
	if t == nil || t.g == nil {
		return 0
	}
	return t.g.Size()
}

// Window returns the window the transport currently uses (nil before Prepare).
func (t *WindowTransport) Window() *Window {
	if t == nil {
		return nil
	}
	return t.w
}

// ready returns an error for a nil transport or one not prepared yet.
func (t *WindowTransport) ready(op string) error {
	if t == nil || t.g == nil {
		return fmt.Errorf("onesided: WindowTransport.%s on a nil transport or group: %w", op, ErrInvalid)
	}
	if t.w == nil {
		return fmt.Errorf("onesided: WindowTransport.%s before Prepare: %w", op, ErrInvalid)
	}
	return nil
}

// Prepare implements Transport. It reuses the window when it is large
// enough, and otherwise frees it and allocates a new one. At most
// MaxTransportSlots send and as many receive slots; sizes whose window
// would not fit an int are an ErrInvalid.
func (t *WindowTransport) Prepare(ctx context.Context, tileBytes, sendSlots, recvSlots int) error {
	if t == nil || t.g == nil {
		return fmt.Errorf("onesided: WindowTransport.Prepare on a nil transport or group: %w", ErrInvalid)
	}
	if tileBytes <= 0 || sendSlots <= 0 || recvSlots <= 0 || sendSlots > MaxTransportSlots || recvSlots > MaxTransportSlots {
		return fmt.Errorf("WindowTransport.Prepare(%d, %d, %d): %w", tileBytes, sendSlots, recvSlots, ErrInvalid)
	}
	P := t.g.Size()
	stride, sigBytes, need, ok := transportLayout(tileBytes, sendSlots, recvSlots, P)
	if !ok {
		return fmt.Errorf("onesided: WindowTransport.Prepare(%d, %d, %d) over %d ranks: the window's size overflows: %w", tileBytes, sendSlots, recvSlots, P, ErrInvalid)
	}
	reuse := t.w != nil && t.w.Len(t.w.rank) >= need
	if reuse {
		// Everyone has drained the previous configuration before anyone
		// clears its signals, and cleared before anyone sends again.
		if err := t.w.Fence(ctx); err != nil {
			return err
		}
		clear(t.w.local[:sigBytes])
	} else {
		if t.w != nil {
			if err := t.w.Free(ctx); err != nil {
				return err
			}
			t.w = nil
		}
		w, err := Allocate(ctx, t.g, need, t.opts...)
		if err != nil {
			return err
		}
		t.w = w
	}
	t.tileBytes, t.sendSlots, t.recvSlots, t.stride = tileBytes, sendSlots, recvSlots, stride
	t.sigOff, t.recvOff, t.sendOff = 0, sigBytes, sigBytes+recvSlots*P*stride
	t.issued = make([]uint64, sendSlots)
	return t.w.Fence(ctx)
}

// MaxTransportSlots bounds a WindowTransport's send and receive slots
// each (a pipeline's depth, a few in practice): the transport keeps state
// per slot in Go memory, and a window of signal words per receive slot.
const MaxTransportSlots = 1 << 16

// transportLayout is the window a WindowTransport needs for tiles of
// tileBytes, sendSlots and recvSlots over P ranks: each tile's stride, the
// signal words' bytes and the whole size; ok is false where a size
// overflows an int.
func transportLayout(tileBytes, sendSlots, recvSlots, P int) (stride, sigBytes, need int, ok bool) {
	st, ok1 := checked.Add(int64(tileBytes), 63)
	words, ok2 := checked.Mul(int64(recvSlots), int64(P))
	sig, ok3 := checked.MulAdd(words, 8, 63)
	all, ok4 := checked.Add(int64(recvSlots), int64(sendSlots))
	slots, ok5 := checked.Mul(all, int64(P))
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return 0, 0, 0, false
	}
	st, sig = st/64*64, sig/64*64
	body, ok6 := checked.Mul(slots, st)
	total, ok7 := checked.Add(sig, body)
	if !ok6 || !ok7 || total != int64(int(total)) {
		return 0, 0, 0, false
	}
	return int(st), int(sig), int(total), true
}

// SendBuf implements Transport (nil before Prepare, or for a slot or peer
// out of range).
func (t *WindowTransport) SendBuf(slot, peer int) []byte {
	if t.ready("SendBuf") != nil || slot < 0 || slot >= t.sendSlots || peer < 0 || peer >= t.g.Size() {
		return nil
	}
	o := t.sendOff + (slot*t.g.Size()+peer)*t.stride
	return t.w.local[o : o+t.tileBytes : o+t.tileBytes]
}

// RecvBuf implements Transport (nil before Prepare, or for a slot or peer
// out of range).
func (t *WindowTransport) RecvBuf(slot, peer int) []byte {
	if t.ready("RecvBuf") != nil || slot < 0 || slot >= t.recvSlots || peer < 0 || peer >= t.g.Size() {
		return nil
	}
	o := t.recvOff + (slot*t.g.Size()+peer)*t.stride
	return t.w.local[o : o+t.tileBytes : o+t.tileBytes]
}

// Expect implements Transport (nothing to do for puts).
func (t *WindowTransport) Expect(int, uint64) error { return nil }

// Send implements Transport.
func (t *WindowTransport) Send(peer, sendSlot, recvSlot, n int, seq uint64) error {
	if err := t.ready("Send"); err != nil {
		return err
	}
	if sendSlot < 0 || sendSlot >= t.sendSlots || recvSlot < 0 || recvSlot >= t.recvSlots ||
		peer < 0 || peer >= t.g.Size() || n < 0 || n > t.tileBytes {
		return fmt.Errorf("onesided: WindowTransport.Send(peer %d, slots %d/%d, %d bytes): %w", peer, sendSlot, recvSlot, n, ErrInvalid)
	}
	me := t.g.Rank()
	P := t.g.Size()
	if err := t.w.PutSignal(peer, t.recvOff+(recvSlot*P+me)*t.stride,
		t.SendBuf(sendSlot, peer)[:n], t.sigOff+(recvSlot*P+me)*8, seq); err != nil {
		return err
	}
	if t.w.net != nil {
		t.issued[sendSlot] = t.w.net.issued()
	}
	return nil
}

// Wait implements Transport.
func (t *WindowTransport) Wait(ctx context.Context, peer, recvSlot int, seq uint64) error {
	if err := t.ready("Wait"); err != nil {
		return err
	}
	if recvSlot < 0 || recvSlot >= t.recvSlots || peer < 0 || peer >= t.g.Size() {
		return fmt.Errorf("onesided: WindowTransport.Wait(peer %d, slot %d): %w", peer, recvSlot, ErrInvalid)
	}
	v, err := t.w.WaitSignal(ctx, t.sigOff+(recvSlot*t.g.Size()+peer)*8, CmpGE, seq)
	if err != nil {
		return err
	}
	if v != seq {
		return fmt.Errorf("slot %d from rank %d holds tile %d, want %d (pipeline shapes differ between ranks?): %w",
			recvSlot, peer, v, seq, ErrInvalid)
	}
	return nil
}

// SendDone implements Transport.
func (t *WindowTransport) SendDone(ctx context.Context, sendSlot int) error {
	if err := t.ready("SendDone"); err != nil {
		return err
	}
	if sendSlot < 0 || sendSlot >= t.sendSlots {
		return fmt.Errorf("onesided: WindowTransport.SendDone(slot %d): %w", sendSlot, ErrInvalid)
	}
	if t.w.net == nil || t.issued[sendSlot] == 0 {
		return nil
	}
	return t.w.net.waitIssued(ctx, t.issued[sendSlot])
}

// Close frees the transport's window (collective).
func (t *WindowTransport) Close(ctx context.Context) error {
	if t == nil {
		return fmt.Errorf("onesided: Close of a nil WindowTransport: %w", ErrInvalid)
	}
	if t.w == nil {
		return nil
	}
	err := t.w.Free(ctx)
	t.w = nil
	return err
}
