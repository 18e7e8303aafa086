//go:build amd64

package jit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/internal/ddtir"
	"github.com/weft-hpc/weft/internal/testenv"
)

func TestMain(m *testing.M) {
	if err := supported(); err != nil {
		// Not a skip of the whole suite: the fallback tests still run.
		fmt.Fprintln(os.Stderr, "jit: native code unavailable here:", err)
	}
	os.Exit(m.Run())
}

// needNative fails on amd64 when generated code should run but cannot, and
// skips (saying why) elsewhere.
func needNative(t *testing.T) {
	t.Helper()
	if err := supported(); err != nil {
		if runtime.GOARCH == "amd64" && os.Getenv("WEFT_JIT_EXPECT_NOEXEC") == "" {
			t.Fatalf("amd64 but native code unavailable (set WEFT_JIT_EXPECT_NOEXEC=1 if the kernel forbids PROT_EXEC): %v", err)
		}
		if runtime.GOARCH != "amd64" {
			testenv.Skip(t, "amd64", "no code generator for %s: %v", runtime.GOARCH, err)
		}
		testenv.Skip(t, "exec-memory", "native code unavailable (WEFT_JIT_EXPECT_NOEXEC): %v", err)
	}
}

func TestCallArgsLayout(t *testing.T) {
	var a callArgs
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"typed", unsafe.Offsetof(a.typed), offTyped},
		{"packed", unsafe.Offsetof(a.packed), offPacked},
		{"n", unsafe.Offsetof(a.n), offN},
		{"ctr0", unsafe.Offsetof(a.ctr0), offCtr0},
		{"pos0", unsafe.Offsetof(a.pos0), offPos0},
		{"lv", unsafe.Offsetof(a.lv), offLv},
		{"levelState", unsafe.Sizeof(a.lv[0]), sizeLevelState},
		{"levelState.pos", unsafe.Offsetof(a.lv[0].pos), 8},
	} {
		if c.got != c.want {
			t.Errorf("callArgs.%s at %d, generated code assumes %d", c.name, c.got, c.want)
		}
	}
	if maxLevels != maxLevelsConst {
		t.Errorf("maxLevels %d != maxLevelsConst %d", maxLevels, maxLevelsConst)
	}
}

// ---- random datatypes ----

var leaves = []*ddt.Type{ddt.Byte, ddt.Int16, ddt.Int32, ddt.Float64, ddt.Complex128}

// must unwraps a constructor result; the random generator only makes valid
// arguments, so an error is a bug in the test (or in ddt).
func must(ty *ddt.Type, err error) *ddt.Type {
	if err != nil {
		panic(fmt.Sprintf("constructor: %v", err))
	}
	return ty
}

// randType builds a random datatype of bounded size; budget bounds the
// element's true extent roughly.
func randType(t *testing.T, r *rand.Rand, depth int) *ddt.Type {
	if depth == 0 || r.IntN(5) == 0 {
		return leaves[r.IntN(len(leaves))]
	}
	old := randType(t, r, depth-1)
	ext := max(old.Extent(), 1)
	small := func(n int) int { return 1 + r.IntN(n) }
	switch r.IntN(12) {
	case 0:
		return must(ddt.Contiguous(small(4), old))
	case 1:
		bl := small(3)
		return must(ddt.Vector(small(12), bl, bl+r.IntN(4), old))
	case 2:
		bl := small(2)
		return must(ddt.HVector(small(40), bl, int64(bl)*ext+int64(r.IntN(3))*ext+int64(r.IntN(2)), old))
	case 3:
		n := small(8)
		bls, ds := make([]int, n), make([]int, n)
		d := 0
		for i := range n {
			bls[i] = small(3)
			ds[i] = d
			d += bls[i] + r.IntN(3)
		}
		if r.IntN(3) == 0 {
			r.Shuffle(n, func(i, j int) { ds[i], ds[j] = ds[j], ds[i]; bls[i], bls[j] = bls[j], bls[i] })
		}
		return must(ddt.Indexed(bls, ds, old))
	case 4:
		n := small(10)
		bl := small(2)
		ds := make([]int, n)
		for i := range n {
			ds[i] = i*(bl+1) + r.IntN(2)*0
		}
		r.Shuffle(n, func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		return must(ddt.IndexedBlock(bl, ds, old))
	case 5:
		n := small(4)
		bls, ds, ts := make([]int, n), make([]int64, n), make([]*ddt.Type, n)
		d := int64(0)
		for i := range n {
			ts[i] = old
			if r.IntN(2) == 0 {
				ts[i] = randType(t, r, depth-1)
			}
			bls[i] = small(3)
			d = (d + 7) &^ 7
			ds[i] = d
			d += int64(bls[i])*max(ts[i].Extent(), 1) + int64(r.IntN(9))
		}
		return must(ddt.Struct(bls, ds, ts))
	case 6:
		sizes := []int{small(6) + 2, small(6) + 2, small(4) + 1}
		sub := []int{small(sizes[0]), small(sizes[1]), small(sizes[2])}
		st := []int{r.IntN(sizes[0] - sub[0] + 1), r.IntN(sizes[1] - sub[1] + 1), r.IntN(sizes[2] - sub[2] + 1)}
		order := ddt.OrderC
		if r.IntN(2) == 0 {
			order = ddt.OrderFortran
		}
		return must(ddt.Subarray(sizes, sub, st, order, old))
	case 7:
		return must(ddt.Resized(old, 0, ext+int64(r.IntN(16))))
	case 10: // negative strides and displacements
		bl := small(2)
		switch r.IntN(3) {
		case 0:
			return must(ddt.Vector(small(8), bl, -(bl + r.IntN(3)), old))
		case 1:
			return must(ddt.HVector(small(8), bl, -int64(bl)*ext-int64(r.IntN(5)), old))
		default:
			n := small(6)
			ds := make([]int64, n)
			for i := range ds {
				ds[i] = -int64(i)*ext*int64(bl+1) - int64(r.IntN(3))
			}
			r.Shuffle(n, func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
			return must(ddt.HIndexedBlock(bl, ds, old))
		}
	case 11: // negative extent: later elements at lower addresses
		return must(ddt.Resized(old, 0, -ext-int64(r.IntN(8))))
	case 8: // large inner stride: transpose-shaped
		n := 8 + r.IntN(40)
		col := must(ddt.Vector(n, 1, n, old))
		return must(ddt.Resized(col, 0, ext))
	default:
		hi := small(200)
		bls, ds := make([]int, hi), make([]int64, hi)
		for i := range hi {
			bls[i] = small(5)
			ds[i] = int64(i) * 8 * ext
		}
		r.Shuffle(hi, func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		return must(ddt.HIndexed(bls, ds, old))
	}
}

// layout returns base and typed length for count elements of ir.
func layout(ir *ddtir.IR, count int) (base, n int64) {
	lo, hi := int64(0), int64(0)
	for _, k := range []int64{0, int64(count - 1)} {
		lo = min(lo, k*ir.Extent+ir.TrueLB)
		hi = max(hi, k*ir.Extent+ir.TrueLB+ir.TrueExtent)
	}
	return -lo, hi - lo
}

func fill(r *rand.Rand, b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, r.Uint64())
		b = b[8:]
	}
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// differential packs and unpacks count elements of ty with the interpreter
// (ty has JIT off) and with kernel k, in random chunk sizes from random
// offsets, into misaligned buffers, and compares every byte.
func differential(t *testing.T, r *rand.Rand, ty *ddt.Type, k ddtir.Kernel, count int) {
	t.Helper()
	ir := irOf(ty)
	base, tl := layout(ir, count)
	mis := int64(r.IntN(64))
	typedAll := make([]byte, mis+base+tl+64)
	typed := typedAll[mis:]
	fill(r, typedAll)
	base += int64(r.IntN(3)) // a little slack before element 0
	total := int64(count) * ir.Size
	want := make([]byte, total)
	if n, err := ty.PackRange(want, typed, base, count, 0); err != nil || int64(n) != total {
		t.Fatalf("interpreter pack: %d %v", n, err)
	}
	pmis := int64(r.IntN(64))
	gotAll := make([]byte, total+pmis)
	got := gotAll[pmis:]
	for from := int64(0); from < total; {
		chunk := total - from
		switch r.IntN(8) {
		case 0:
			chunk = 1 + r.Int64N(min(chunk, 64))
		case 1, 2, 3:
			chunk = 1 + r.Int64N(chunk)
		}
		n, err := k.Pack(got[from:from+chunk], typed, base, count, from)
		if err != nil || int64(n) != chunk {
			t.Fatalf("jit pack at %d: %d %v", from, n, err)
		}
		from += chunk
	}
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("pack differs at stream byte %d of %d (count %d)\n%s", i, total, count, ir)
	}
	// Unpack a random stream into two identical typed buffers.
	src := make([]byte, total)
	fill(r, src)
	ta := append([]byte(nil), typedAll...)
	tb := append([]byte(nil), typedAll...)
	if _, err := ty.UnpackRange(ta[mis:], src, base, count, 0); err != nil {
		t.Fatal(err)
	}
	for from := int64(0); from < total; {
		chunk := min(total-from, 1+r.Int64N(total))
		n, err := k.Unpack(tb[mis:], src[from:from+chunk], base, count, from)
		if err != nil || int64(n) != chunk {
			t.Fatalf("jit unpack at %d: %d %v", from, n, err)
		}
		from += chunk
	}
	if !bytes.Equal(ta, tb) {
		i := 0
		for ta[i] == tb[i] {
			i++
		}
		t.Fatalf("unpack differs at typed byte %d (count %d)\n%s", int64(i)-mis-base, count, ir)
	}
}

func interpType(t testing.TB, ty *ddt.Type) *ddt.Type {
	t.Helper()
	if ty.Committed() { // a predefined leaf
		ty = must(ddt.Contiguous(1, ty))
	}
	if err := ty.SetJIT(ddt.JITOff); err != nil {
		t.Fatal(err)
	}
	if err := ty.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return ty
}

func TestDifferentialRandom(t *testing.T) {
	t.Parallel()
	needNative(t)
	iters := 400
	if testing.Short() {
		iters = 100
	}
	for _, isa := range []Features{hostFeatures, {AVX2: true, ERMS: true}, {}} {
		if isa.AVX512 && !hostFeatures.AVX512 || isa.AVX2 && !hostFeatures.AVX2 {
			continue
		}
		fuzzTypes(t, isa, defaultConfig, iters, 1, 90)
	}
}

// TestDifferentialTinyBodies forces the other code shapes on random types:
// nearly every loop becomes a level, big bodies become sequences of parts,
// blocks above 64 bytes take the vector loop or rep movsb, and packs are cut
// into 4 KiB calls.
func TestDifferentialTinyBodies(t *testing.T) {
	t.Parallel()
	needNative(t)
	tiny := defaultConfig.with(tinyLimits)
	iters := 300
	if testing.Short() {
		iters = 80
	}
	fuzzTypes(t, hostFeatures, tiny, iters, 2, 75)
	// non-temporal stores for every block of 256 bytes and more, all widths
	nt := tiny.with(func(c *config) { c.ntMin = 256 })
	r := rand.New(rand.NewPCG(5, 5))
	for _, isa := range []Features{hostFeatures, {AVX2: hostFeatures.AVX2}, {}} {
		fuzzTypes(t, isa, nt, iters/2, 4, 75)
		for _, bl := range []int{256, 257, 1000, 4099} { // every large-block path
			ty := interpType(t, must(ddt.Vector(5, 1, 2, must(ddt.Contiguous(bl, ddt.Byte)))))
			k, err := compileWith(irOf(ty), isa, nt)
			if err != nil {
				t.Fatal(err)
			}
			for range 4 {
				differential(t, r, ty, k, 3)
			}
		}
	}
}

// tinyLimits shrinks the unrolling, body and chunk limits so that the other
// code shapes are generated: nearly every loop becomes a level, big bodies
// become sequences of parts, blocks above 64 bytes take the vector loop or
// rep movsb, and packs are cut into 4 KiB calls.
func tinyLimits(c *config) {
	c.maxBodyBlocks, c.unrollLoop, c.unrollLoopSize, c.unrollMax, c.repMin, c.chunkBytes = 3, 1, 8, 64, 300, 4096
}

// fuzzTypes compiles iters random types for isa (every fourth with extreme
// extents, strides or displacements) and checks each against the
// interpreter; at least minPct percent of those not skipped must compile.
func fuzzTypes(t *testing.T, isa Features, cfg *config, iters int, stream uint64, minPct int) {
	t.Helper()
	seed := uint64(1)
	if s := os.Getenv("WEFT_JIT_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	r := rand.New(rand.NewPCG(seed, stream))
	compiled, declined, skipped := 0, 0, 0
	for i := range iters {
		switch err := diffRandom(t, r, isa, cfg, i%4 == 3); {
		case err == errSkipped:
			skipped++
		case errors.Is(err, ddt.ErrNotCompiled):
			declined++
			if declined <= 3 {
				t.Logf("declined: %v", err)
			}
		case err != nil:
			t.Fatalf("seed %d iter %d: %v", seed, i, err)
		default:
			compiled++
		}
	}
	t.Logf("isa %v: %d types compiled, %d declined, %d skipped", isa, compiled, declined, skipped)
	if compiled*100 < (iters-skipped)*minPct {
		t.Errorf("only %d of %d random types compiled (%d skipped)", compiled, iters, skipped)
	}
}

// errSkipped: diffRandom drew a type too large to test quickly.
var errSkipped = errors.New("type too large for a quick differential")

// diffRandom draws a random type from r, compiles it for isa and checks it
// against the interpreter (differential) at three counts. With extreme, the
// type is first moved or spread by extreme amounts (diffExtreme). It returns
// errSkipped for a type whose buffers would be large, the compile error
// (ddt.ErrNotCompiled for a declined layout), or nil once checked.
func diffRandom(t *testing.T, r *rand.Rand, isa Features, cfg *config, extreme bool) error {
	t.Helper()
	if extreme {
		return diffExtreme(t, r, isa, cfg)
	}
	ty := interpType(t, randType(t, r, 3))
	ir := irOf(ty)
	if ir.Root == nil || ir.TrueExtent > 1<<20 || ir.Size > 1<<18 {
		return errSkipped // keep the test fast: typed buffers stay small
	}
	k, err := compileWith(ir, isa, cfg)
	if err != nil {
		return fmt.Errorf("compile (%v): %w\n%s", isa, err, ir)
	}
	for _, count := range []int{1, 1 + r.IntN(5), 1 + r.IntN(60)} {
		if int64(count)*(ir.Size+abs(ir.Extent)) > 1<<21 {
			count = max(1, int(1<<21/(ir.Size+abs(ir.Extent))))
		}
		differential(t, r, ty, k, count)
	}
	return nil
}

// extremes are extents, strides and displacements near the ends of int64.
var extremes = []int64{1 << 62, 1<<62 + 16, -(1 << 62), 1 << 61, 1<<61 + 8, math.MaxInt64, math.MaxInt64 - 7,
	math.MinInt64 + 1, math.MinInt64 + 8, math.MaxInt64/3 + 1, 1<<32 + 8, -(1 << 31)}

// diffExtreme draws a random type and gives it an extreme extent, extreme
// displacements that cancel, or copies an extreme stride apart (wrapping
// ddttest.RandomExtremeType's types too, now and then). One element, when
// it fits a small buffer, is packed natively and compared with the
// interpreter; more elements, whose offsets overflow int64 or lie beyond any
// buffer, must be rejected by ddt before a kernel runs, with JIT on and
// auto, without writing outside the buffer.
func diffExtreme(t *testing.T, r *rand.Rand, isa Features, cfg *config) error {
	t.Helper()
	var old *ddt.Type
	if r.IntN(4) == 0 {
		x, err := ddttest.RandomExtremeType(r, 3)
		if err != nil {
			t.Fatal(err)
		}
		old = x
	} else {
		old = randType(t, r, 2)
	}
	e := extremes[r.IntN(len(extremes))]
	var ty *ddt.Type
	var err error
	switch r.IntN(3) {
	case 0:
		ty, err = ddt.Resized(old, int64(r.IntN(16))-8, e)
	case 1: // displacements ±e that cancel
		var in *ddt.Type
		if in, err = ddt.HIndexed([]int{1 + r.IntN(2)}, []int64{-e}, old); err == nil {
			ty, err = ddt.Struct([]int{1}, []int64{e + int64(r.IntN(8))}, []*ddt.Type{in})
		}
	default:
		ty, err = ddt.HVector(2+r.IntN(3), 1+r.IntN(2), e, old)
	}
	if err != nil {
		if !errors.Is(err, ddt.ErrOverflow) {
			t.Fatalf("extreme constructor: %v", err)
		}
		return errSkipped
	}
	for _, mode := range []ddt.JITMode{ddt.JITOn, ddt.JITAuto} {
		jt := must(ddt.Dup(ty))
		if err := jt.SetJIT(mode); err != nil {
			t.Fatal(err)
		}
		if err := jt.Commit(); err != nil {
			if !errors.Is(err, ddt.ErrOverflow) && !errors.Is(err, ddt.ErrNotCompiled) {
				t.Fatalf("extreme commit (JIT %v): %v", mode, err)
			}
			return errSkipped
		}
		const guard = 256
		all := make([]byte, 2*guard+64)
		typed := all[guard : guard+64 : guard+64]
		src := make([]byte, 1<<12)
		fill(r, src)
		for _, count := range []int{2, 3, 4, 5, 1 << 20} {
			base := int64(r.IntN(64))
			if n, err := jt.UnpackRange(typed, src, base, count, 0); err != nil {
				if n != 0 || errors.Is(err, ddt.ErrInternal) {
					t.Fatalf("extreme unpack (JIT %v) of %v count %d: %d, %v", mode, jt, count, n, err)
				}
			}
			if n, err := jt.PackRange(src, typed, base, count, 0); err != nil && (n != 0 || errors.Is(err, ddt.ErrInternal)) {
				t.Fatalf("extreme pack (JIT %v) of %v count %d: %d, %v", mode, jt, count, n, err)
			}
		}
		for i, b := range all {
			if b != 0 && (i < guard || i >= guard+64) {
				t.Fatalf("extreme type %v (JIT %v) wrote %d bytes outside the buffer", jt, mode, i-guard)
			}
		}
	}
	it := interpType(t, must(ddt.Dup(ty)))
	ir := irOf(it)
	if ir.Root == nil || ir.TrueExtent > 1<<16 || ir.Size > 1<<16 {
		return errSkipped
	}
	if base, n := layout(ir, 1); base+n > 1<<20 {
		// differential's buffer spans offset 0 to the element: a type
		// whose data lie 2^32 bytes away (a lower bound that extreme
		// displacements moved) would take gigabytes and a minute to fill.
		return errSkipped
	}
	k, err := compileWith(ir, isa, cfg)
	if err != nil {
		return fmt.Errorf("compile (%v): %w\n%s", isa, err, ir)
	}
	differential(t, r, it, k, 1)
	return nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestRegressionNestedBigBody: a struct part that is itself a loop over a
// struct too large to unroll was once compiled with an empty body (found by
// the fuzzer with tiny limits).
func TestRegressionNestedBigBody(t *testing.T) {
	t.Parallel()
	needNative(t)
	cfg := defaultConfig.with(func(c *config) { c.maxBodyBlocks = 3 })
	inner := must(ddt.Struct([]int{1, 2, 1, 3, 1}, []int64{0, 8, 24, 40, 64}, []*ddt.Type{ddt.Int32, ddt.Int16, ddt.Float64, ddt.Byte, ddt.Int32}))
	loop := must(ddt.HVector(3, 1, 96, inner))
	ty := interpType(t, must(ddt.Struct([]int{1, 1, 2}, []int64{0, 400, 512}, []*ddt.Type{loop, ddt.Float64, inner})))
	k, err := compileWith(irOf(ty), hostFeatures, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nested := false
	if s, ok := k.(*seqKernel); ok {
		for _, pt := range s.parts {
			if _, ok := pt.k.(*seqKernel); ok {
				nested = true
			}
		}
	}
	if !nested {
		t.Fatalf("expected a sequence part that is itself a sequence kernel, got %T\n%s", k, irOf(ty))
	}
	r := rand.New(rand.NewPCG(9, 9))
	for _, count := range []int{1, 2, 7} {
		differential(t, r, ty, k, count)
	}
}

// TestWalkBlockRuns checks the walker's loop for runs of whole blocks
// (blockRun) against the interpreter: index lists and strided loops of
// blocks of every length it moves in one fixed-size copy and a few it
// does not, under a struct as LAMMPS's types are, unrolled into one body
// so that every window the random chunks cut goes through the walker.
func TestWalkBlockRuns(t *testing.T) {
	t.Parallel()
	needNative(t)
	r := rand.New(rand.NewPCG(7, 7))
	for _, bl := range []int{1, 3, 4, 8, 12, 16, 20, 24, 32, 40} {
		elem := must(ddt.Contiguous(bl, ddt.Byte))
		disps := make([]int, 150)
		at := 0
		for i := range disps {
			at += 1 + r.IntN(3)
			disps[i] = at
		}
		idx := must(ddt.IndexedBlock(1, disps, elem))
		vec := must(ddt.Vector(120, 1, 3, elem))
		st := must(ddt.Struct([]int{1, 1}, []int64{0, int64(4 * at * bl)}, []*ddt.Type{idx, vec}))
		for _, ty := range []*ddt.Type{idx, vec, st} {
			ty = interpType(t, ty)
			k, err := compileWith(irOf(ty), hostFeatures, defaultConfig)
			if err != nil {
				t.Fatalf("block %d: %v", bl, err)
			}
			for range 6 {
				differential(t, r, ty, k, 1+r.IntN(2))
			}
		}
	}
}
