package endpoint

import (
	"bytes"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/weft-hpc/weft/ddt"
)

// TestFillFragment: a pipelined copy's fragments arrive byte for byte
// whichever way fillFragment puts them into the slot (plain, streamed,
// a typed pack straight into the slot or through private memory), at
// every offset; below fillChoose a copy always streams (nothing is
// timed); while streaming, one fragment in fillProbeEvery is filled
// plainly and timed, and a fill mode follows its measurements (slow
// plain fills stream, fast ones do not).
func TestFillFragment(t *testing.T) {
	v := &vci{log: hclog.NewNullLogger()}
	src := make([]byte, 3*fillChoose+100)
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
			l.fill.stream = stream
			l.fill.slotNs, l.fill.privNs = 1, 1 // measured already: no decision on the first fill
			o := &copyOut{buf: src, n: n}
			if typed {
				o.buf, o.u = nil, u
			}
			k := fillChoose + 4096
			for o.off = 0; o.off < n; o.off += k {
				m := min(k, n-o.off)
				dst := make([]byte, m)
				if err := v.fillFragment(l, o, dst); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dst, want[o.off:o.off+m]) {
					t.Fatalf("typed %v, streaming %v: fragment at %d differs", typed, stream, o.off)
				}
			}
		}
	}
	// Below fillChoose a copy streams untimed.
	l := &nodeLink{}
	dst := make([]byte, fillChoose-1)
	if err := v.fillFragment(l, &copyOut{buf: src, n: len(src)}, dst); err != nil || !bytes.Equal(dst, src[:len(dst)]) {
		t.Fatalf("small fragment: %v", err)
	}
	if l.fill.frags != 0 || l.fill.slotNs != 0 {
		t.Fatal("a fragment below fillChoose was timed")
	}
	// The probe cadence while streaming, and the decision.
	l = &nodeLink{}
	l.fill = fillMode{stream: true, slotNs: 1e6, privNs: 1}
	o := &copyOut{buf: src, n: len(src)}
	dst = make([]byte, fillChoose)
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
		t.Fatalf("%d plain fills timed in %d streamed fragments, want 4", timed, 4*fillProbeEvery)
	}
	l.fill = fillMode{slotNs: 1, privNs: 1}
	l.fill.slotNs = 100 * fillSlowRatio // as if the plain fills had become slow
	l.fill.frags = 1                    // not a probe: only slotNs is measured
	if err := v.fillFragment(l, o, dst); err != nil {
		t.Fatal(err)
	}
	if !l.fill.stream {
		t.Fatalf("plain fills at %.1f ns/B against %.3f privately: not streaming", l.fill.slotNs, l.fill.privNs)
	}
}
