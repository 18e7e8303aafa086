package endpoint

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weft-hpc/weft/ddt"
)

// TestFillFragment: a pipelined copy's fragments arrive byte for byte
// whichever way fillFragment puts them into the slot (a contiguous send
// streamed, a typed send packed straight into the slot or packed
// privately and streamed), at every offset; and a timed pipelined send's
// sample goes to the link's fill chooser when it is typed (under the way
// its fragments took), to its way chooser when it is not.
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
			o := &copyOut{buf: src, n: n, stream: stream}
			if typed {
				o.buf, o.u = nil, u
			}
			for o.off = 0; o.off < n; o.off += frag {
				m := min(frag, n-o.off)
				dst := make([]byte, m)
				if err := v.fillFragment(o, dst); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dst, want[o.off:o.off+m]) {
					t.Fatalf("typed %v, streaming %v: fragment at %d differs", typed, stream, o.off)
				}
			}
		}
	}
	const n = 1 << 20
	for _, c := range []struct {
		typed, stream bool
	}{{false, false}, {true, false}, {true, true}} {
		l := &nodeLink{}
		o := &copyOut{n: n, t0: time.Now().Add(-time.Millisecond), stream: c.stream}
		if c.typed {
			o.u = u
		}
		l.way.pipeDone(o, 3)
		v.pipeCheck(l, 2) // another slot: not yet
		if l.way.pipeN == 0 {
			t.Fatalf("%+v: sample taken before the last fragment's slot was refilled", c)
		}
		v.pipeCheck(l, 3) // refilling the last fragment's slot: it is free
		pipe, plain, streamed := l.way.Estimate(wayPipe, n), l.fill.Estimate(fillPlain, n), l.fill.Estimate(fillStream, n)
		switch {
		case l.way.pipeN != 0:
			t.Fatalf("%+v: sample not taken", c)
		case !c.typed && (pipe <= 0 || plain != 0 || streamed != 0),
			c.typed && !c.stream && (pipe != 0 || plain <= 0 || streamed != 0),
			c.typed && c.stream && (pipe != 0 || plain != 0 || streamed <= 0):
			t.Fatalf("%+v: estimates pipelined %v, typed plain %v, typed streamed %v", c, pipe, plain, streamed)
		}
	}
}
