package fabric

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/internal/testenv"
)

// words returns n zeroed 8-byte-aligned words as bytes.
func words(n int) []byte {
	w := make([]uint64, n)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*n)
}

func TestSignalEncoding(t *testing.T) {
	for _, c := range []struct{ size, bits int }{
		{8, 0}, {15, 0}, {16, 1}, {24, 2}, {32, 2}, {39, 2}, {40, 3}, {4096, 9}, {4104, 10}, {1 << 30, 27},
	} {
		if b := SignalSlotBits(c.size); b != c.bits {
			t.Errorf("SignalSlotBits(%d) = %d, want %d", c.size, b, c.bits)
		}
	}
	for _, sb := range []int{0, 1, 9, 27, MaxSignalSlotBits} {
		vb := SignalValueBits(sb)
		maxVal := uint64(1)<<uint(vb) - 1
		maxOff := (1<<uint(sb) - 1) * 8
		// The largest slot and value that fit.
		d, ok := EncodeSignal(sb, maxOff, maxVal)
		if !ok || d>>62 != 2 || (d>>uint(vb))&(1<<uint(sb)-1) != uint64(maxOff/8) || d&maxVal != maxVal {
			t.Errorf("slot bits %d: EncodeSignal(%d, %#x) = %#x, %v", sb, maxOff, maxVal, d, ok)
		}
		// One past either.
		if _, ok := EncodeSignal(sb, maxOff, maxVal+1); ok {
			t.Errorf("slot bits %d: value %#x accepted", sb, maxVal+1)
		}
		if _, ok := EncodeSignal(sb, maxOff+8, 1); ok {
			t.Errorf("slot bits %d: offset %d accepted", sb, maxOff+8)
		}
		// Bad offsets.
		for _, off := range []int{-8, 4, 1} {
			if _, ok := EncodeSignal(sb, off, 1); ok {
				t.Errorf("slot bits %d: offset %d accepted", sb, off)
			}
			if _, ok := EncodeSignalParts(sb, 0, off, 1); ok {
				t.Errorf("slot bits %d: parts at offset %d accepted", sb, off)
			}
		}
		// Parts carry any value, from the largest origin that fits.
		maxOrigin := min(1<<28, 1<<uint(60-sb)) - 1
		p, ok := EncodeSignalParts(sb, maxOrigin, maxOff, math.MaxUint64)
		if !ok || p[0]>>60 != 0xc || p[1]>>60 != 0xd || p[2]>>60 != 0xe {
			t.Errorf("slot bits %d: parts %#x, %v", sb, p, ok)
		}
		if _, ok := EncodeSignalParts(sb, maxOrigin+1, maxOff, 1); ok {
			t.Errorf("slot bits %d: origin %d accepted", sb, maxOrigin+1)
		}
		if _, ok := EncodeSignalParts(sb, -1, 0, 1); ok {
			t.Errorf("slot bits %d: origin -1 accepted", sb)
		}
	}
	for _, sb := range []int{-1, MaxSignalSlotBits + 1} {
		if _, ok := EncodeSignal(sb, 0, 1); ok {
			t.Errorf("slot bits %d accepted", sb)
		}
	}
}

// TestSignalApplyBounds feeds synthetic completions to the C apply path:
// valid signals are stored, and everything else (out-of-range slots and
// origins, foreign CQ data, a commit without its halves, completions
// without CQ data) is handed back in order, untouched, with nothing
// written outside the sink's memory.
func TestSignalApplyBounds(t *testing.T) {
	backing := words(8) // the sink is words 2..4 (3 slots, 2 slot bits)
	mem := backing[16:40]
	for i := range backing {
		backing[i] = 0xee
	}
	const guard = 0xeeeeeeeeeeeeeeee
	clear(mem)
	s, err := NewSignalSink(mem, 2)
	if err != nil {
		t.Fatal(err)
	}
	if s.SlotBits() != 2 {
		t.Fatalf("slot bits %d", s.SlotBits())
	}
	word := func(i int) uint64 { return binary.NativeEndian.Uint64(backing[8*i:]) }
	set := func(off int, v uint64) uint64 {
		d, ok := EncodeSignal(2, off, v)
		if !ok {
			t.Fatalf("EncodeSignal(2, %d, %d) refused", off, v)
		}
		return d
	}
	parts := func(origin, off int, v uint64) [3]uint64 {
		p, ok := EncodeSignalParts(2, origin, off, v)
		if !ok {
			t.Fatalf("EncodeSignalParts refused")
		}
		return p
	}
	sig := func(d uint64) Completion { return Completion{Flags: CompRemoteCQData | CompRMA, Data: d} }
	big := uint64(math.MaxUint64 - 5)
	p0, p1 := parts(0, 8, big), parts(1, 16, 1<<61)
	badSlot, _ := EncodeSignal(2, 24, 9) // encodable (2 bits) but past the 3 slots
	badCommit := parts(1, 24, 5)         // slot 3: out of range
	orphan := parts(0, 0, 77)            // commit alone
	badOrigin := uint64(3<<62 | 0<<60 | 2<<32 | 1)
	c := []Completion{
		{Context: 1, Flags: CompSend},
		sig(set(0, 5)),
		sig(badSlot),
		{Context: 2, Flags: CompRemoteCQData, Data: 0x1234}, // not a signal: top bits 00
		sig(p0[0]), sig(p1[0]), sig(p0[1]), sig(p1[1]), sig(p1[2]), sig(p0[2]), // interleaved origins
		sig(badCommit[2]),
		sig(orphan[2]),
		sig(badOrigin),
		{Context: 3, Flags: CompRecv, Data: set(16, 1)}, // signal bits but no CompRemoteCQData
		sig(3<<62 | 3<<60), // part 3 does not exist
	}
	kept := s.Apply(c)
	want := []uint64{1, badSlot, 0x1234, badCommit[2], orphan[2], badOrigin, set(16, 1), 3<<62 | 3<<60}
	if kept != len(want) {
		t.Fatalf("kept %d completions: %+v", kept, c[:kept])
	}
	for i, w := range want {
		got := c[i].Data
		if i == 0 {
			got = c[i].Context
		}
		if got != w {
			t.Errorf("kept[%d] = %+v, want data/context %#x", i, c[i], w)
		}
	}
	if s.Applied() != 7 {
		t.Errorf("applied %d, want 7", s.Applied())
	}
	if word(2) != 5 || word(3) != big || word(4) != 1<<61 {
		t.Errorf("slots %#x %#x %#x", word(2), word(3), word(4))
	}
	for _, i := range []int{0, 1, 5, 6, 7} {
		if word(i) != guard {
			t.Errorf("word %d outside the sink was written: %#x", i, word(i))
		}
	}
	if s.Apply(nil) != 0 {
		t.Error("Apply(nil)")
	}
	// Sinks that cannot be.
	if _, err := NewSignalSink(backing[:4], 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("4-byte sink: %v", err)
	}
	if _, err := NewSignalSink(backing[4:20], 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("misaligned sink: %v", err)
	}
	if _, err := NewSignalSink(mem, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("no origins: %v", err)
	}
	if _, err := NewSignalSink(mem, 1<<28+1); !errors.Is(err, ErrInvalid) {
		t.Errorf("2^28+1 origins: %v", err)
	}
}

// TestSignalsOverProvider sends put-with-signal as single writes carrying
// the signal in remote CQ data (inject writes with data, a larger write
// with data, a signal alone, a value in three parts) and checks, every
// iteration, that the target's WaitWordSignals sees the flag only with the
// data in place, and that ordinary completions still come back.
func TestSignalsOverProvider(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapRMA | CapRemoteCQData, MsgOrder: OrderWAW})
			if p.info.CQDataSize < 8 {
				testenv.Skip(t, "cq-data:"+prov, "%s grants %d bytes of CQ data, fewer than 8", prov, p.info.CQDataSize)
			}
			const dataLen = 64 << 10
			target, err := p.dom.Alloc(dataLen + 4096)
			if err != nil {
				t.Fatal(err)
			}
			tb := target.Bytes()
			sink, err := NewSignalSink(tb, 2)
			if err != nil {
				t.Fatal(err)
			}
			sb := sink.SlotBits()
			flag := (*uint64)(unsafe.Pointer(&tb[8]))
			data := tb[4096 : 4096+dataLen]
			src, err := p.dom.Alloc(dataLen)
			if err != nil {
				t.Fatal(err)
			}
			key, dst := target.MR().Key(), p.a.addr[1]
			raddr := func(off int) uint64 { return target.MR().RemoteAddr(tb[off : off+1]) }
			var out [8]Completion
			wait := func(i, want uint64) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					reached, n, err := p.b.cq.WaitWordSignals(sink, flag, want, out[:], 1000)
					if err != nil {
						t.Fatal(err)
					}
					if n != 0 {
						t.Fatalf("iteration %d: target CQ yielded %+v", i, out[:n])
					}
					if reached {
						return
					}
					drain(p.a.cq) // the initiator progresses too (tcp;ofi_rxm)
					if time.Now().After(deadline) {
						t.Fatalf("iteration %d: flag %#x never reached %#x", i, *flag, want)
					}
				}
			}
			// post posts ops, driving progress on both sides (through
			// the sink on the target) while the provider says EAGAIN.
			post := func(ops []Op) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for len(ops) > 0 {
					n, err := p.a.ep.PostBatch(ops)
					ops = ops[n:]
					if err == nil {
						return
					}
					if !errors.Is(err, ErrAgain) || time.Now().After(deadline) {
						t.Fatalf("PostBatch: %v", err)
					}
					if n, err := p.b.cq.ReadSignals(sink, out[:], 1); n != 0 || err != nil {
						t.Fatalf("target: %+v, %v", out[:n], err)
					}
					drain(p.a.cq)
				}
			}
			const iters = 60
			var tracked uint64
			for i := uint64(1); i <= iters; i++ {
				size := []int{8, 100, p.info.InjectSize, dataLen, 0}[i%5]
				if size > p.info.InjectSize && size != dataLen {
					size = p.info.InjectSize
				}
				sd := src.Bytes()[:size]
				for j := range sd {
					sd[j] = byte(i)
				}
				val := i
				if i%7 == 0 {
					val = math.MaxUint64 - i // needs parts
				}
				var ops []Op
				if d, ok := EncodeSignal(sb, 8, val); ok {
					switch {
					case size == dataLen:
						ops = []Op{WriteDataOp(sd, src.Desc(), d, dst, raddr(4096), key, 500+i)}
						tracked++
					case size == 0:
						ops = []Op{InjectWriteDataOp(nil, d, dst, raddr(8), key)}
					default:
						ops = []Op{InjectWriteDataOp(sd, d, dst, raddr(4096), key)}
					}
				} else {
					ps, ok := EncodeSignalParts(sb, 1, 8, val)
					if !ok {
						t.Fatal("parts refused")
					}
					ops = []Op{InjectWriteDataOp(sd, ps[0], dst, raddr(4096), key)}
					if size == dataLen {
						ops[0] = WriteDataOp(sd, src.Desc(), ps[0], dst, raddr(4096), key, 500+i)
						tracked++
					}
					ops = append(ops, InjectWriteDataOp(nil, ps[1], dst, raddr(8), key), InjectWriteDataOp(nil, ps[2], dst, raddr(8), key))
				}
				post(ops)
				wait(i, val)
				if *flag != val {
					t.Fatalf("iteration %d: flag %#x, want %#x", i, *flag, val)
				}
				if k := bytes.IndexFunc(data[:size], func(r rune) bool { return r != rune(byte(i)) }); k >= 0 {
					t.Fatalf("iteration %d: signal seen before data (data[%d] = %d)", i, k, data[k])
				}
				for tracked > 0 { // the source is reused next iteration
					c := mustComp(t, p.a.cq)
					if c.Context < 500 {
						t.Fatalf("initiator completion %+v", c)
					}
					tracked--
				}
				*flag = 0 // the next value may be smaller
			}
			if got := sink.Applied(); got < iters {
				t.Errorf("sink applied %d signals for %d iterations", got, iters)
			}
			// The single-operation form, and an ordinary completion passing
			// through ReadSignals untouched.
			d, _ := EncodeSignal(sb, 16, 42)
			for deadline := time.Now().Add(10 * time.Second); ; {
				err := p.a.ep.InjectWriteData(src.Bytes()[:8], d, dst, raddr(4096), key)
				if err == nil {
					break
				}
				if !errors.Is(err, ErrAgain) || time.Now().After(deadline) {
					t.Fatalf("InjectWriteData: %v", err)
				}
				if n, err := p.b.cq.ReadSignals(sink, out[:], 1); n != 0 || err != nil {
					t.Fatalf("target: %+v, %v", out[:n], err)
				}
				drain(p.a.cq)
			}
			rx := tb[2048:2064]
			retry(t, func() error { return p.b.ep.Recv(rx, target.Desc(), AddrUnspec, 77) }, p.a.cq)
			copy(src.Bytes(), "ordinary")
			retry(t, func() error { return p.a.ep.Inject(src.Bytes()[:8], dst) }, p.a.cq)
			deadline := time.Now().Add(10 * time.Second)
			got := false
			for !got || binary.NativeEndian.Uint64(tb[16:]) != 42 {
				n, err := p.b.cq.ReadSignals(sink, out[:], 100)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range out[:n] {
					if c.Context != 77 || c.Flags&CompRemoteCQData != 0 || string(rx[:8]) != "ordinary" {
						t.Fatalf("completion %+v %q", c, rx[:8])
					}
					got = true
				}
				drain(p.a.cq)
				if time.Now().After(deadline) {
					t.Fatalf("receive %v, word %d", got, binary.NativeEndian.Uint64(tb[16:]))
				}
			}
			if q := backlog[p.a.cq]; len(q) != 0 {
				t.Errorf("the initiator got completions for injected writes: %+v", q)
			}
			// Errors.
			if _, err := p.b.cq.ReadSignals(nil, out[:], 1); !errors.Is(err, ErrInvalid) {
				t.Errorf("nil sink: %v", err)
			}
			if _, err := p.b.cq.ReadSignals(sink, nil, 1); !errors.Is(err, ErrInvalid) {
				t.Errorf("no out: %v", err)
			}
			if _, _, err := p.b.cq.WaitWordSignals(sink, nil, 1, out[:], 1); !errors.Is(err, ErrInvalid) {
				t.Errorf("nil word: %v", err)
			}
			if _, _, err := p.b.cq.WaitWordSignals(sink, (*uint64)(unsafe.Pointer(&tb[4])), 1, out[:], 1); !errors.Is(err, ErrInvalid) {
				t.Errorf("misaligned word: %v", err)
			}
			if n, err := p.a.ep.PostBatch([]Op{InjectWriteDataOp(src.Bytes()[:p.info.InjectSize+1], d, dst, raddr(0), key)}); n != 0 || !errors.Is(err, ErrInvalid) {
				t.Errorf("oversized InjectWriteData in a batch: %d, %v", n, err)
			}
			if err := p.a.ep.InjectWriteData(src.Bytes()[:p.info.InjectSize+1], d, dst, raddr(0), key); !errors.Is(err, ErrInvalid) {
				t.Errorf("oversized InjectWriteData: %v", err)
			}
			if err := p.a.ep.InjectWriteData(nil, d, dst, ^uint64(0), key); !errors.Is(err, ErrInvalid) {
				t.Errorf("InjectWriteData to the outside address: %v", err)
			}
			if OpKindInjectWriteData.String() != "InjectWriteData" {
				t.Errorf("kind name %q", OpKindInjectWriteData)
			}
		})
	}
}
