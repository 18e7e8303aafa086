//go:build amd64

package jit

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/ddtir"
	"github.com/weft-hpc/weft/internal/testenv"
)

// bigStrided is a transpose-free strided type large enough that one pack
// takes many generated-code calls: count elements of a vector of 8-byte
// blocks.
func bigStrided(t *testing.T) *ddt.Type {
	t.Helper()
	return interpType(t, must(ddt.Vector(1<<16, 1, 3, ddt.Float64)))
}

// TestConcurrentShared packs with one kernel from many goroutines at once,
// each with its own buffers, and checks every result.
func TestConcurrentShared(t *testing.T) {
	needNative(t)
	ty := bigStrided(t)
	k, _, err := compileFresh(irOf(ty))
	if err != nil {
		t.Fatal(err)
	}
	ir := irOf(ty)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			typed := make([]byte, ir.TrueExtent)
			for i := range typed {
				typed[i] = byte(i*7 + g)
			}
			want := make([]byte, ir.Size)
			if _, err := ty.PackRange(want, typed, 0, 1, 0); err != nil {
				errs <- err
				return
			}
			got := make([]byte, ir.Size)
			for rep := range 20 {
				clear(got)
				if _, err := k.Pack(got, typed, 0, 1, 0); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, want) {
					errs <- errors.New("concurrent pack differs")
					return
				}
				back := make([]byte, len(typed))
				if _, err := k.Unpack(back, got, 0, 1, 0); err != nil {
					errs <- err
					return
				}
				for i := int64(0); i < ir.TrueExtent; i += 24 {
					if back[i] != typed[i] {
						errs <- errors.New("concurrent unpack differs")
						return
					}
				}
				_ = rep
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestGCDuringLongPacks runs forced GC cycles and an allocating goroutine
// while large packs run, and checks that GC stop-the-world pauses stay short
// (each call into generated code is bounded) and results stay correct.
func TestGCDuringLongPacks(t *testing.T) {
	needNative(t)
	ty := interpType(t, must(ddt.Vector(1<<20, 2, 3, ddt.Float64))) // 16 MiB packed per element
	ir := irOf(ty)
	k, _, err := compileFresh(ir)
	if err != nil {
		t.Fatal(err)
	}
	typed := make([]byte, ir.TrueExtent)
	for i := range typed {
		typed[i] = byte(i * 13)
	}
	want := make([]byte, ir.Size)
	if _, err := ty.PackRange(want, typed, 0, 1, 0); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var gcs sync.WaitGroup
	gcs.Add(1)
	go func() {
		defer gcs.Done()
		var sink [][]byte
		for {
			select {
			case <-stop:
				return
			default:
			}
			sink = append(sink, make([]byte, 1<<16))
			if len(sink) > 64 {
				sink = sink[:0]
			}
			runtime.GC()
		}
	}()
	got := make([]byte, ir.Size)
	deadline := time.Now().Add(time.Second)
	packs := 0
	for time.Now().Before(deadline) || packs < 3 {
		clear(got)
		if _, err := k.Pack(got, typed, 0, 1, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("pack under GC differs")
		}
		packs++
	}
	close(stop)
	gcs.Wait()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var worst uint64
	for _, p := range ms.PauseNs {
		worst = max(worst, p)
	}
	t.Logf("%d packs of %d MiB under continuous GC; %d GCs, worst pause %v", packs, ir.Size>>20, ms.NumGC, time.Duration(worst))
	// Each call into generated code is bounded (WEFT_TUNE jitchunk, ~100 µs),
	// so the collector waits at most that long for this goroutine. On a
	// loaded shared machine pauses of tens of ms happen anyway (CPU
	// contention), so only a pause that only a stuck goroutine explains fails.
	if time.Duration(worst) > time.Second {
		t.Errorf("worst GC pause %v: generated code holds off the collector", time.Duration(worst))
	}
}

// TestForcedFallback simulates a kernel that refuses executable memory: the
// compiler declines, ddt keeps interpreting, results are unchanged. It
// registers its compiler with ddt, which is process-wide, so the body runs
// in a child process (inChild).
func TestForcedFallback(t *testing.T) {
	if !testenv.InChild(t, "TestForcedFallback") {
		return
	}
	c := &compiler{force: true, noExec: true}
	ty := interpType(t, must(ddt.Vector(100, 2, 5, ddt.Int32)))
	_, err := c.Compile(irOf(ty))
	if !errors.Is(err, ddt.ErrNotCompiled) || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Compile with exec refused: %v, want ErrNotCompiled and ErrUnsupported", err)
	}
	if err := c.enable(); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Enable with exec refused: %v", err)
	}
	// A type committed in auto mode with the (refusing) compiler registered
	// falls back to the interpreter and still packs correctly.
	ddtir.SetCompiler(c)
	defer Disable()
	u := must(ddt.Vector(100, 2, 5, ddt.Int32))
	if err := u.SetJIT(ddt.JITAuto); err != nil { // whatever WEFT_JIT says
		t.Fatal(err)
	}
	if err := u.Commit(); err != nil {
		t.Fatal(err)
	}
	if u.Compiled() {
		t.Fatal("type compiled although executable memory is refused")
	}
	typed := make([]byte, 100*5*4)
	for i := range typed {
		typed[i] = byte(i)
	}
	a, b := make([]byte, 800), make([]byte, 800)
	if _, err := u.Pack(a, typed, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ty.Pack(b, typed, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("fallback pack differs")
	}
	// WEFT_JIT=on semantics: Commit fails when the type cannot be compiled.
	v := must(ddt.Vector(100, 2, 5, ddt.Int32))
	_ = v.SetJIT(ddt.JITOn)
	if err := v.Commit(); !errors.Is(err, ddt.ErrNotCompiled) {
		t.Fatalf("Commit with JIT on and exec refused: %v", err)
	}
}

// TestRegistrationAndCache commits through ddt with the package compiler:
// identical types share one kernel through the cache; auto mode compiles
// after enough use; on mode compiles at Commit.
func TestRegistrationAndCache(t *testing.T) {
	needNative(t)
	if err := Enable(); err != nil {
		t.Fatal(err)
	}
	mk := func(m ddt.JITMode) *ddt.Type {
		ty := must(ddt.Vector(300, 3, 7, ddt.Float32))
		if err := ty.SetJIT(m); err != nil {
			t.Fatal(err)
		}
		if err := ty.Commit(); err != nil {
			t.Fatal(err)
		}
		return ty
	}
	before := GetStats()
	a, b := mk(ddt.JITOn), mk(ddt.JITOn)
	if !a.Compiled() || !b.Compiled() {
		t.Fatal("types not compiled with JIT on")
	}
	st := GetStats()
	if st.CacheHits-before.CacheHits < 1 {
		t.Errorf("identical type not served from the cache: %+v -> %+v", before, st)
	}
	// JIT on for one type compiles it at Commit whatever the default mode
	// (ddt calls CompileNow): native code is cached under the eager key,
	// not the auto policy's deferred kernel.
	if cacheEntries > 0 {
		cacheMu.Lock()
		got := cache[string(appendKey(nil, irOf(a), HostFeatures(), false, defaultConfig))]
		cacheMu.Unlock()
		if _, ok := got.(*kernel); !ok {
			t.Errorf("type with JIT on (default mode %v): cached %T, want native *kernel", ddt.DefaultJITMode(), got)
		}
	}
	ref := mk(ddt.JITOff)
	typed := make([]byte, 300*7*4)
	for i := range typed {
		typed[i] = byte(i ^ 0x5a)
	}
	want := make([]byte, 300*3*4)
	if _, err := ref.Pack(want, typed, 1); err != nil {
		t.Fatal(err)
	}
	// auto: interpreted by the Go walker at first, compiled after use;
	// Compiled says so only once the native code exists.
	c := mk(ddt.JITAuto)
	if defaultConfig.autoBlocks > 0 && (c.Compiled() || !c.JITPending()) {
		t.Fatalf("auto before use: Compiled %v, JITPending %v; want false, true", c.Compiled(), c.JITPending())
	}
	got := make([]byte, len(want))
	for i := range 40 { // 40 × 300 blocks > the 2000-block threshold
		clear(got)
		if _, err := c.Pack(got, typed, 1); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("auto pack %d differs", i)
		}
	}
	if !c.Compiled() || c.JITPending() {
		t.Errorf("auto after use: Compiled %v, JITPending %v; want true, false", c.Compiled(), c.JITPending())
	}
}

// TestAutoPolicyLayouts commits every application layout in auto mode
// through ddt and checks that each is accepted (none declined at Commit),
// packs correctly while warming up, and ends up on native code.
func TestAutoPolicyLayouts(t *testing.T) {
	needNative(t)
	c := &compiler{}
	for name, ac := range appCases(t) {
		k, err := c.Compile(irOf(ac.ty))
		if err != nil {
			t.Fatalf("%s: auto Compile: %v", name, err)
		}
		ir := irOf(ac.ty)
		base, tl := layout(ir, ac.count)
		typed := make([]byte, base+tl)
		for i := range typed {
			typed[i] = byte(i * 31)
		}
		want := make([]byte, int64(ac.count)*ir.Size)
		if _, err := ac.ty.PackRange(want, typed, base, ac.count, 0); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		packs := int(defaultConfig.autoBlocks/(ir.Root.Blocks*int64(ac.count))) + 2
		for i := 0; i < packs; i++ {
			clear(got)
			if _, err := k.Pack(got, typed, base, ac.count, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: auto pack %d differs", name, i)
			}
		}
		if lk, ok := k.(*lazyKernel); ok && lk.native.Load() == nil {
			t.Errorf("%s: still interpreted after %d packs (%d blocks)", name, packs, lk.work.Load())
		}
	}
}

// TestExecMemoryModes runs the differential fuzzer with code placed by the
// mprotect path (WEFT_TUNE=jitdualmap=0) as well as the default dual mapping,
// and checks W^X in /proc/self/maps: no mapping is writable and executable.
func TestExecMemoryModes(t *testing.T) {
	needNative(t)
	iters := 60
	if testing.Short() {
		iters = 20
	}
	for _, dual := range []bool{true, false} {
		cfg := defaultConfig.with(func(c *config) { c.dualMap = dual })
		fuzzTypes(t, hostFeatures, cfg, iters, 7, 90)
		m, err := newCode([]byte{0xc3}, cfg.dualMap)
		if err != nil {
			t.Fatal(err)
		}
		poolMu.Lock()
		refused := dualRefused
		poolMu.Unlock()
		if got, want := m.rw != nil, dual && !refused; got != want {
			t.Errorf("dual=%v: piece has RW view %v", dual, got)
		}
		var a callArgs
		callCode(uintptr(unsafe.Pointer(&m.mem[0])), &a)
		m.release()
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			testenv.Skip(t, "procfs", "no /proc/self/maps: %v", err)
		}
		for _, line := range strings.Split(string(maps), "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.Contains(f[1], "w") && strings.Contains(f[1], "x") {
				t.Errorf("writable and executable mapping: %s", line)
			}
		}
	}
}

// TestCacheKey checks the binary cache key against the IR text it replaced:
// over random types, two IRs get the same key exactly when their text forms
// (with features and policy) are equal.
func TestCacheKey(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	byKey := map[string]string{}
	byText := map[string]string{}
	for range 600 {
		ir := irOf(interpType(t, randType(t, r, 3)))
		for _, f := range []Features{{}, {AVX2: true, ERMS: true}, {AVX2: true, AVX512: true}} {
			for _, lazy := range []bool{false, true} {
				key := string(appendKey(nil, ir, f, lazy, defaultConfig))
				text := fmt.Sprint(f, lazy, "\n", ir.String())
				if old, ok := byKey[key]; ok && old != text {
					t.Fatalf("two IRs share a key:\n%s\n%s", old, text)
				}
				if old, ok := byText[text]; ok && old != key {
					t.Fatalf("one IR, two keys:\n%s", text)
				}
				byKey[key], byText[text] = text, key
			}
		}
	}
	if len(byKey) < 1000 {
		t.Fatalf("only %d distinct keys: random types too alike", len(byKey))
	}
}
