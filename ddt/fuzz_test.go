package ddt_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	. "github.com/weft-hpc/weft/ddt"
)

// FuzzPackRange builds a random type tree from the fuzzer's seed and checks
// every entry point (whole, chunked pack, chunked unpack) against the naive
// reference packer. `go test` runs the seed corpus; run
// `go test -fuzz FuzzPackRange ./ddt` to explore. Crashers found so far are
// kept as named tests (none so far: see docs/ddt.md).
func FuzzPackRange(f *testing.F) {
	for _, s := range []uint64{0, 1, 2, 42, 1234, 99999} {
		f.Add(s, uint8(2), uint16(7), uint16(3))
	}
	f.Fuzz(func(t *testing.T, seed uint64, count uint8, chunk1, chunk2 uint16) {
		r := rand.New(rand.NewPCG(seed, seed>>7))
		tt := randomType(r, 5)
		checkAgainstRef(t, tt, int(count%6), []int{int(chunk1%97) + 1, int(chunk2%13) + 1})
	})
}

// FuzzIRInvariants checks that every committed random type has a valid IR
// whose text form is stable and whose facts agree with the type.
func FuzzIRInvariants(f *testing.F) {
	for _, s := range []uint64{3, 5, 8, 13} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 17))
		tt := randomType(r, 5)
		if err := tt.Commit(); err != nil {
			t.Fatal(err)
		}
		ir := tt.IR()
		if ir.Size != tt.Size() || ir.Extent != tt.Extent() || ir.TrueLB != tt.TrueLB() || ir.TrueExtent != tt.TrueExtent() {
			t.Fatalf("IR facts %v disagree with %v", ir, tt)
		}
		if ir.Root != nil {
			if err := Validate(ir.Root); err != nil {
				t.Fatal(err)
			}
			// Alignment facts hold for every block.
			checkAlign(t, ir.Root, 0)
		}
		if ir.String() != tt.IR().String() {
			t.Fatalf("IR text not stable")
		}
	})
}

// checkAlign verifies Node.Align against every block the node copies.
func checkAlign(t *testing.T, n *Node, o int64) {
	var walk func(m *Node, o int64)
	walk = func(m *Node, o int64) {
		o += m.Disp
		switch m.Op {
		case OpBlock:
			if o%n.Align != 0 || m.Len%n.Align != 0 {
				t.Fatalf("node align %d violated by block at %d len %d", n.Align, o, m.Len)
			}
		case OpLoop:
			for i := int64(0); i < m.Count; i++ {
				walk(m.Child, o+i*m.Stride)
			}
		case OpIndex:
			for _, off := range m.Offsets {
				walk(m.Child, o+off)
			}
		case OpBlocks:
			for i, off := range m.Offsets {
				if (o+off)%n.Align != 0 || m.Lens[i]%n.Align != 0 {
					t.Fatalf("node align %d violated by block at %d len %d", n.Align, o+off, m.Lens[i])
				}
			}
		case OpStruct:
			for i, c := range m.Children {
				walk(c, o+m.Offsets[i])
			}
		}
	}
	walk(n, o)
	switch n.Op {
	case OpLoop, OpIndex:
		checkAlign(t, n.Child, 0)
	case OpStruct:
		for _, c := range n.Children {
			checkAlign(t, c, 0)
		}
	}
}

// FuzzBounds throws arbitrary buffer lengths, bases, counts and offsets at
// PackRange/UnpackRange: they must either return an error or produce the
// reference bytes, and never panic or touch memory outside the slices.
func FuzzBounds(f *testing.F) {
	f.Add(uint64(1), int64(0), int16(2), int64(0), uint16(100), uint16(10))
	f.Add(uint64(7), int64(-5), int16(-1), int64(3), uint16(3), uint16(0))
	f.Add(uint64(9), int64(1<<40), int16(3), int64(-2), uint16(0), uint16(65535))
	f.Fuzz(func(t *testing.T, seed uint64, base int64, count int16, from int64, typedLen, packedLen uint16) {
		r := rand.New(rand.NewPCG(seed, 5))
		tt := randomType(r, 4)
		if err := tt.Commit(); err != nil {
			t.Fatal(err)
		}
		typed := pattern(int(typedLen), seed)
		packed := make([]byte, packedLen)
		n, err := tt.PackRange(packed, typed, base, int(count), from)
		if err != nil {
			if n != 0 {
				t.Fatalf("error %v with n=%d", err, n)
			}
			return
		}
		want := refPack(tt, typed, base, int(count))
		if n != min(len(packed), len(want)-int(from)) || !bytes.Equal(packed[:n], want[from:from+int64(n)]) {
			t.Fatalf("PackRange n=%d differs from reference", n)
		}
		u := append([]byte(nil), typed...)
		if k, err := tt.UnpackRange(u, packed[:n], base, int(count), from); err != nil || k != n {
			t.Fatalf("UnpackRange after a valid PackRange: %d %v", k, err)
		}
		if !bytes.Equal(u, typed) {
			t.Fatalf("unpacking the packed bytes back changed the buffer")
		}
	})
}
