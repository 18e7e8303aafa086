package ddt_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	. "github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
)

// The tests of this package check every entry point against the reference
// packer of ddt/ddttest, which flattens a type to its MPI type map straight
// from the constructor arguments (never from the IR) and copies byte by byte.
// They live in package ddt_test because ddttest imports ddt.

// refPack packs count elements the naive way.
func refPack(t *Type, typed []byte, base int64, count int) []byte {
	return ddttest.Pack(t, typed, base, count)
}

// refUnpack writes the whole stream packed into a copy of typed the naive way.
func refUnpack(t *Type, typed, packed []byte, base int64, count int) []byte {
	return ddttest.UnpackRange(t, typed, packed, base, count, 0)
}

// layout returns a typed buffer length and base that fit count elements.
func layout(t *Type, count int) (n int, base int64) { return ddttest.Layout(t, count) }

// randomType returns a random uncommitted type tree of depth ≤ depth.
func randomType(r *rand.Rand, depth int) *Type { return ddttest.RandomType(r, depth) }

func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// checkAgainstRef compares every interpreter entry point with the reference for t.
func checkAgainstRef(tb testing.TB, t *Type, count int, chunks []int) {
	tb.Helper()
	if err := t.Commit(); err != nil {
		tb.Fatalf("commit %v: %v", t, err)
	}
	n, base := layout(t, count)
	typed := pattern(n, uint64(n))
	want := refPack(t, typed, base, count)
	if int64(len(want)) != int64(count)*t.Size() {
		tb.Fatalf("%v: reference packed %d bytes, size says %d", t, len(want), int64(count)*t.Size())
	}
	got := make([]byte, len(want)+7)
	nn, err := t.PackRange(got, typed, base, count, 0)
	if err != nil || nn != len(want) || !bytes.Equal(got[:nn], want) {
		tb.Fatalf("%v count %d: PackRange n=%d err=%v\n got %x\nwant %x\nIR:\n%s", t, count, nn, err, got[:nn], want, t.DumpIR())
	}
	// Chunked packing, resuming at each offset.
	for _, ch := range chunks {
		if ch <= 0 {
			continue
		}
		buf := make([]byte, 0, len(want))
		for from := 0; from < len(want); {
			seg := make([]byte, ch)
			k, err := t.PackRange(seg, typed, base, count, int64(from))
			if err != nil || k != min(ch, len(want)-from) {
				tb.Fatalf("%v: chunk %d at %d: n=%d err=%v", t, ch, from, k, err)
			}
			buf = append(buf, seg[:k]...)
			from += k
		}
		if !bytes.Equal(buf, want) {
			tb.Fatalf("%v count %d chunk %d: chunked pack differs\n got %x\nwant %x\nIR:\n%s", t, count, ch, buf, want, t.DumpIR())
		}
	}
	// Unpack of a fresh stream into a patterned buffer, whole and chunked.
	stream := pattern(len(want), 99)
	wantT := refUnpack(t, typed, stream, base, count)
	for _, ch := range append([]int{len(want) + 1}, chunks...) {
		if ch <= 0 {
			continue
		}
		dst := append([]byte(nil), typed...)
		for from := 0; from < len(want); {
			e := min(from+ch, len(want))
			k, err := t.UnpackRange(dst, stream[from:e], base, count, int64(from))
			if err != nil || k != e-from {
				tb.Fatalf("%v: unpack chunk %d at %d: n=%d err=%v", t, ch, from, k, err)
			}
			from = e
		}
		if !bytes.Equal(dst, wantT) {
			tb.Fatalf("%v count %d chunk %d: unpack differs\nIR:\n%s", t, count, ch, t.DumpIR())
		}
	}
}

func mustT(tb testing.TB) func(*Type, error) *Type {
	return func(t *Type, err error) *Type {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return t
	}
}

func TestRandomTypesAgainstReference(t *testing.T) {
	for seed := uint64(0); seed < 1500; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		tt := randomType(r, 4)
		count := r.IntN(4)
		chunks := []int{1 + r.IntN(7), 1 + r.IntN(64)}
		checkAgainstRef(t, tt, count, chunks)
	}
}
