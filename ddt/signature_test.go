package ddt

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// expand lists the predefined elements of k instances of t (small types).
func expand(t *Type, k int) []*Type {
	var one []*Type
	switch {
	case t.size == 0:
	case t.comb == CombinerNamed:
		one = []*Type{t}
	case t.comb == CombinerStruct:
		for i, m := range t.types {
			one = append(one, expand(m, t.ints[1+i])...)
		}
	default:
		one = expand(t.types[0], int(t.size/t.types[0].size))
	}
	var out []*Type
	for range k {
		out = append(out, one...)
	}
	return out
}

// naive hashes a list of elements term by term.
func naive(es []*Type) uint64 {
	h, p := uint64(0), uint64(1)
	for _, e := range es {
		h = addmod(h, mulmod(symbol(e), p))
		p = mulmod(p, sigBase)
	}
	return h
}

// committer returns a helper that commits a constructor's result.
func committer(t *testing.T) func(ty *Type, err error) *Type {
	return func(ty *Type, err error) *Type {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := ty.Commit(); err != nil {
			t.Fatal(err)
		}
		return ty
	}
}

// TestSignatureAgainstExpansion: the composed hash of random nested
// types, and of each of their element-aligned prefixes, equals the
// hash of the element list written out.
func TestSignatureAgainstExpansion(t *testing.T) {
	mk := committer(t)
	rng := rand.New(rand.NewPCG(7, 9))
	basics := []*Type{Int8, Int32, Int64, Float32, Float64, Complex128, Uint16}
	var gen func(depth int) *Type
	gen = func(depth int) *Type {
		if depth == 0 || rng.IntN(3) == 0 {
			return basics[rng.IntN(len(basics))]
		}
		old := gen(depth - 1)
		switch rng.IntN(4) {
		case 0:
			return mk(Contiguous(1+rng.IntN(3), old))
		case 1:
			return mk(Vector(1+rng.IntN(3), 1+rng.IntN(2), 3, old))
		case 2:
			return mk(Indexed([]int{1, 2}, []int{0, 4}, old))
		}
		o2 := gen(depth - 1)
		return mk(Struct([]int{1 + rng.IntN(2), 1 + rng.IntN(2)}, []int64{0, 64}, []*Type{old, o2}))
	}
	for i := 0; i < 300; i++ {
		ty := gen(3)
		k := 1 + rng.IntN(3)
		es := expand(ty, k)
		var off int64
		for j := 0; j <= len(es); j++ {
			got, err := ty.Signature(k, off)
			if err != nil {
				t.Fatalf("%v ×%d prefix %d bytes: %v", ty, k, off, err)
			}
			if want := naive(es[:j]); got != want {
				t.Fatalf("%v ×%d prefix of %d elements: hash %x, want %x", ty, k, j, got, want)
			}
			// Asked again (the memo of the last shape), and after another shape.
			if again, err := ty.Signature(k, off); err != nil || again != got {
				t.Fatalf("%v ×%d prefix %d bytes asked again: %x, %v; first %x", ty, k, off, again, err, got)
			}
			if _, err := ty.Signature(k, 0); err != nil {
				t.Fatal(err)
			}
			if again, err := ty.Signature(k, off); err != nil || again != got {
				t.Fatalf("%v ×%d prefix %d bytes after another shape: %x, %v; first %x", ty, k, off, again, err, got)
			}
			if j < len(es) {
				off += es[j].size
			}
		}
	}
}

func TestSignatureRules(t *testing.T) {
	mk := committer(t)
	n := 1000
	col := mk(Vector(n, 1, 7, Float64))
	h1, err := col.Signature(1, int64(8*n))
	if err != nil {
		t.Fatal(err)
	}
	if h2, _ := Float64.Signature(n, int64(8*n)); h1 != h2 {
		t.Errorf("a column and a row of float64s differ: %x %x", h1, h2)
	}
	if h2, _ := Float64.Signature(2*n, int64(8*n)); h1 != h2 {
		t.Errorf("a message of n float64s is not a prefix of 2n")
	}
	if a, _ := Int32.Signature(n, int64(4*n)); a == mustSig(t, Float32, n, int64(4*n)) {
		t.Errorf("int32 and float32 signatures hash alike")
	}
	s1 := mk(Struct([]int{1, 1}, []int64{0, 8}, []*Type{Int32, Float64}))
	s2 := mk(Struct([]int{1, 1}, []int64{0, 8}, []*Type{Float64, Int32}))
	if mustSig(t, s1, 10, 120) == mustSig(t, s2, 10, 120) {
		t.Errorf("structs with fields of other types hash alike")
	}
	if _, err := Float64.Signature(2, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("prefix ending inside a float64: %v, want ErrInvalid", err)
	}
	if h := mustSig(t, Byte, 100, 100); h != 0 {
		t.Errorf("bytes hash to %x, want 0 (untyped)", h)
	}
	// Huge counts compose in logarithmic time.
	big := mk(Contiguous(1<<20, mk(Contiguous(1<<20, Int32))))
	if mustSig(t, big, 4, 1<<44) != mustSig(t, Int32, 1<<42, 1<<44) {
		t.Errorf("2^42 int32s nested and flat hash differently")
	}
}

func mustSig(t *testing.T, ty *Type, count int, n int64) uint64 {
	t.Helper()
	h, err := ty.Signature(count, n)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSigThen: signatures of parts joined with Then equal the signature
// of one type holding the same elements, and a prefix of the joined
// parts equals the prefix of that type.
func TestSigThen(t *testing.T) {
	mk := committer(t)
	pair := mk(Struct([]int{3, 2}, []int64{0, 24}, []*Type{Float64, Int32}))
	a, err := Float64.SigOf(3, 24)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Int32.SigOf(2, 8)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := pair.SigOf(1, 32)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Then(b); got != whole {
		t.Errorf("float64×3 then int32×2 = %+v, the struct of both %+v", got, whole)
	}
	half, _ := Int32.SigOf(2, 4)
	if pre, _ := pair.SigOf(1, 28); a.Then(half) != pre {
		t.Errorf("prefix of parts %+v, prefix of the struct %+v", a.Then(half), pre)
	}
	if a.Then(Sig{}) != a || (Sig{}).Then(a) != a {
		t.Errorf("the empty signature is not neutral")
	}
	if c, _ := Int32.SigOf(2, 8); b.Then(a) == a.Then(c) {
		t.Errorf("parts in another order hash alike")
	}
	if _, err := Float64.SigOf(2, 20); !errors.Is(err, ErrInvalid) {
		t.Errorf("SigOf of a prefix ending inside an element: %v", err)
	}
}

// TestSignatureRepeatNoAllocs: the signature of a message of the shape
// just asked for is found again without allocating.
func TestSignatureRepeatNoAllocs(t *testing.T) {
	ty := committer(t)(Vector(64, 3, 5, Float64))
	n := 4 * ty.Size()
	want, err := ty.Signature(4, n)
	if err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if got, err := ty.Signature(4, n); err != nil || got != want {
			t.Fatalf("%x, %v; want %x", got, err, want)
		}
	}); allocs != 0 {
		t.Errorf("%.1f allocations per repeated Signature, want 0", allocs)
	}
}

// BenchmarkSignature is the signature of a message of the same shape as
// the last one (the memo) and of alternating shapes (computed each time).
func BenchmarkSignature(b *testing.B) {
	ty, err := Vector(64, 3, 5, Float64)
	if err == nil {
		err = ty.Commit()
	}
	if err != nil {
		b.Fatal(err)
	}
	n := 4 * ty.Size()
	b.Run("repeat", func(b *testing.B) {
		for b.Loop() {
			_, _ = ty.Signature(4, n)
		}
	})
	b.Run("alternate", func(b *testing.B) {
		k := 0
		for b.Loop() {
			k ^= 1
			_, _ = ty.Signature(3+k, int64(3+k)*ty.Size())
		}
	})
}

// TestSignatureConcurrent: goroutines asking for different shapes of one
// type at once each get their own shape's signature (the memo of the
// last shape is shared).
func TestSignatureConcurrent(t *testing.T) {
	ty := committer(t)(Vector(8, 3, 5, Int32))
	want := make([]uint64, 4)
	for k := range want {
		var err error
		if want[k], err = ty.Signature(k+1, int64(k+1)*ty.Size()-4*int64(k%2)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				k := (g + i) % len(want)
				got, err := ty.Signature(k+1, int64(k+1)*ty.Size()-4*int64(k%2))
				if err != nil || got != want[k] {
					errs <- fmt.Errorf("shape %d: %x, %v; want %x", k, got, err, want[k])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
