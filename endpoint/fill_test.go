package endpoint

import (
	"bytes"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/weft-hpc/weft/ddt"
)

// TestFillFragment: a pipelined copy's fragments arrive byte for byte
// whichever way fillFragment puts them into the slot (a contiguous send
// streamed, a typed send packed straight into the slot or packed
// privately and streamed), at every offset; a contiguous send's
// fragments are never timed; while a typed send streams, one fragment
// in fillProbeEvery is packed into the slot and timed; and the fill mode
// follows its measurements (slow plain packs stream); fragments shorter
// than fillLearnMin are neither timed nor counted.
func TestFillFragment(t *testing.T) {
	const frag = 96 << 10
	v := &vci{log: hclog.NewNullLogger()}
	src := make([]byte, 5*frag+100)
	for i := range src {
		src[i] = byte(i*31 + i>>9)
	}
	vec, err := ddt.Vector(len(src)/16, 8, 16, ddt.Byte)
	if err != nil {
		t.Fatal(err)
	}
	if err := vec.Commit(); err != nil {
		t.Fatal(err)
	}
	packed := make([]byte, vec.Size())
	if _, err := vec.Pack(packed, src, 1); err != nil {
		t.Fatal(err)
	}
	u := &typedRecv{buf: src, count: 1, t: vec, n: int(vec.Size())}
	for _, typed := range []bool{false, true} {
		want, n := src, len(src)
		if typed {
			want, n = packed, len(packed)
		}
		for _, stream := range []bool{false, true} {
			l := &nodeLink{}
			l.fill = fillMode{stream: stream, slotNs: 1, privNs: 1}
			o := &copyOut{buf: src, n: n}
			if typed {
				o.buf, o.u = nil, u
			}
			for o.off = 0; o.off < n; o.off += frag {
				m := min(frag, n-o.off)
				dst := make([]byte, m)
				if err := v.fillFragment(l, o, dst); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dst, want[o.off:o.off+m]) {
					t.Fatalf("typed %v, streaming %v: fragment at %d differs", typed, stream, o.off)
				}
			}
			if !typed && l.fill.frags != 0 {
				t.Fatal("a contiguous send's fragments were timed")
			}
		}
	}
	// The probe cadence while a typed send streams, and the decision.
	l := &nodeLink{}
	l.fill = fillMode{stream: true, slotNs: 1e6, privNs: 1}
	o := &copyOut{u: u, n: len(packed)}
	dst := make([]byte, frag)
	timed := 0
	for range 4 * fillProbeEvery {
		before := l.fill.slotNs
		if err := v.fillFragment(l, o, dst); err != nil {
			t.Fatal(err)
		}
		if l.fill.slotNs != before {
			timed++
		}
	}
	if timed != 4 {
		t.Fatalf("%d packs into the slot timed in %d streamed fragments, want 4", timed, 4*fillProbeEvery)
	}
	l.fill = fillMode{slotNs: 100 * fillSlowRatio, privNs: 1, frags: 1} // as if the plain packs had become slow
	if err := v.fillFragment(l, o, dst); err != nil {
		t.Fatal(err)
	}
	if !l.fill.stream {
		t.Fatalf("packs into the slot at %.1f ns/B against %.3f privately: not streaming", l.fill.slotNs, l.fill.privNs)
	}
	// A fragment shorter than fillLearnMin is neither timed nor counted,
	// and leaves the mode as the long ones set it.
	short := make([]byte, fillLearnMin-1)
	for _, stream := range []bool{false, true} {
		l.fill = fillMode{stream: stream, slotNs: 7, privNs: 5, frags: 1}
		for range 2 * fillProbeEvery {
			if err := v.fillFragment(l, o, short); err != nil {
				t.Fatal(err)
			}
		}
		if l.fill != (fillMode{stream: stream, slotNs: 7, privNs: 5, frags: 1}) {
			t.Fatalf("short fragments changed the fill mode: %+v", l.fill)
		}
		if !bytes.Equal(short, packed[:len(short)]) {
			t.Fatal("a short fragment differs")
		}
	}
}
