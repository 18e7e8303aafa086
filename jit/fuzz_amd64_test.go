package jit

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// FuzzDifferential is the JIT's native fuzz target: the fuzzer's seed builds
// a random type tree, isa picks the instruction set the code is generated
// for (the host's, AVX2 or SSE2 only), and limits shrinks the unrolling,
// body and chunk limits so that the other code shapes (loop levels,
// sequence kernels, vector loops, rep movsb, 4 KiB calls) are generated
// too. Each type is packed and unpacked against the interpreter at three
// counts, in random chunks from random offsets, into misaligned buffers
// (differential). Seeds ≡ 3 (mod 4) draw types with extreme extents,
// strides or displacements instead (diffExtreme): one element is compared,
// and counts whose offsets overflow must be rejected without a write. `go test` runs the seed corpus; explore with
//
//	go test -run '^$' -fuzz FuzzDifferential -fuzztime 60s ./jit
func FuzzDifferential(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 7, 42, 1234, 99999} {
		f.Add(s, uint8(s), s%3 == 0)
	}
	f.Fuzz(func(t *testing.T, seed uint64, isa uint8, limits bool) {
		needNative(t)
		feats := []Features{hostFeatures, {AVX2: hostFeatures.AVX2, ERMS: hostFeatures.ERMS}, {}}[int(isa)%3]
		cfg := defaultConfig
		if limits {
			cfg = defaultConfig.with(tinyLimits)
		}
		r := rand.New(rand.NewPCG(seed, seed>>9|1))
		if err := diffRandom(t, r, feats, cfg, seed%4 == 3); err != nil && err != errSkipped && !errors.Is(err, ddt.ErrNotCompiled) {
			t.Fatal(err) // declined layouts run on the interpreter
		}
	})
}
