// Package jit compiles ddt datatypes to native x86-64 pack and unpack code at
// commit time.
//
// Importing the package registers it as ddt's Compiler (unless WEFT_JIT=off);
// every type committed afterwards packs through generated code, with ddt's
// interpreter as the fallback: on other architectures, when the kernel refuses
// executable memory, and for the few shapes the compiler declines.
//
// What the generated code looks like. A committed type's IR is lowered to a
// chain of loop and index levels around a straight-line body (see plan.go):
// loop counts, strides, displacements and index tables are constants in the
// code; small blocks are copied by exact-width moves (overlapping pairs for odd
// sizes), medium blocks by unrolled 16/32/64-byte vector moves, large ones by a
// vector loop or rep movsb; two-level nests with a large inner stride (matrix
// transposes) get cache-blocked code. The code is a leaf function called
// through a NOSPLIT assembly trampoline (call_amd64.s), about as cheap as a Go
// call.
//
// Resumption and the garbage collector. Generated code cannot be preempted, so
// each call copies at most WEFT_TUNE jitchunk bytes (1 MiB) of whole units and the
// Go driver loops; units cut by the ends of a pack window are finished by a Go
// walker, which makes packs resumable at any byte like the interpreter's.
//
// Policy. WEFT_JIT=off|on|auto (ddt reads it; Type.SetJIT overrides per type,
// except that WEFT_JIT=off is a process-wide switch no type overrides).
// In on mode Commit generates code at once. In auto
// mode Commit only plans the type (so unsupported shapes still fall back at
// Commit) and the kernel first packs with the package's Go walker, counting
// the blocks it moves (the current call included, so one large pack compiles
// at once); once that count reaches WEFT_TUNE jitauto (the
// point where the estimated saving of about 1.5 ns per block has paid for a
// compilation of about 2 µs, about 2000 blocks) the type is compiled and later packs run
// native code. Contiguous types are one copy either way.
// Compiled code is cached by a compact binary form of the canonical IR, so
// committing an identical type again costs one pass over the IR and one map
// lookup.
package jit

import (
	"fmt"
	"sync"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/ddtir"
	"github.com/weft-hpc/weft/internal/wlog"
)

var log = wlog.Named("jit")

// ErrUnsupported is returned by Enable when generated code cannot run here:
// another architecture, or executable memory refused by the kernel. It
// wraps the shared errs.ErrNotSupported.
var ErrUnsupported = fmt.Errorf("jit: native code generation %w", errs.ErrNotSupported)

// compiler is the ddtir.Compiler this package registers with ddt. The zero
// value is ready to use, and a nil *compiler behaves like the zero value;
// all its methods are safe for concurrent use.
type compiler struct {
	// force compiles every type it can, ignoring the auto policy.
	force bool
	// cfg is the code shape (nil: defaultConfig, from WEFT_TUNE).
	cfg *config
	// noExec simulates a kernel that refuses executable memory (tests).
	noExec bool
}

// config returns c's configuration.
func (c *compiler) config() *config {
	if c == nil || c.cfg == nil {
		return defaultConfig
	}
	return c.cfg
}

var (
	cacheMu sync.Mutex
	cache   = map[string]ddtir.Kernel{}

	statsMu  sync.Mutex
	compiles int64
	hits     int64
	lastNS   int64
)

// Stats reports the compiler's counters.
type Stats struct {
	Compiles  int64 // types compiled to native code
	CacheHits int64 // commits served from the code cache
	LastNS    int64 // duration of the last compilation in nanoseconds
}

// GetStats returns the package counters.
func GetStats() Stats {
	statsMu.Lock()
	defer statsMu.Unlock()
	return Stats{Compiles: compiles, CacheHits: hits, LastNS: lastNS}
}

// Compile implements ddtir.Compiler. It returns an error wrapping
// ddt.ErrNotCompiled when it declines the type (the interpreter is used), and
// ErrUnsupported (also wrapping ddt.ErrNotCompiled) when native code cannot
// run on this machine.
func (c *compiler) Compile(ir *ddtir.IR) (ddtir.Kernel, error) { return c.compile(ir, false) }

// CompileNow implements ddtir.Compiler: ddt calls it for types whose JIT
// mode is on, which are compiled at Commit whatever the auto policy says.
func (c *compiler) CompileNow(ir *ddtir.IR) (ddtir.Kernel, error) { return c.compile(ir, true) }

// supported is the package's supported, or a refusal when c simulates a
// kernel that refuses executable memory.
func (c *compiler) supported() error {
	if c != nil && c.noExec {
		return fmt.Errorf("%w: executable memory refused (forced)", ErrUnsupported)
	}
	return supported()
}

func (c *compiler) compile(ir *ddtir.IR, now bool) (ddtir.Kernel, error) {
	if err := c.supported(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ddt.ErrNotCompiled)
	}
	cfg := c.config()
	if ir == nil {
		return nil, errDecline("nil IR")
	}
	if err := checkTree(ir); err != nil {
		return nil, err
	}
	eager := now || (c != nil && c.force) || ddt.DefaultJITMode() == ddt.JITOn || cfg.autoBlocks == 0 || ir.Contig
	kb := keyPool.Get().(*[]byte)
	defer func() {
		if cap(*kb) <= 64<<10 { // keep ordinary buffers only
			keyPool.Put(kb)
		}
	}()
	*kb = appendKey((*kb)[:0], ir, HostFeatures(), !eager, cfg)
	cacheMu.Lock()
	k, ok := cache[string(*kb)]
	cacheMu.Unlock()
	if ok {
		statsMu.Lock()
		hits++
		statsMu.Unlock()
		return k, nil
	}
	t0 := time.Now()
	var err error
	if eager {
		k, err = compileWith(ir, HostFeatures(), cfg)
	} else {
		k, err = newLazy(ir, cfg)
	}
	if err != nil {
		return nil, err
	}
	ns := time.Since(t0).Nanoseconds()
	statsMu.Lock()
	compiles++
	lastNS = ns
	statsMu.Unlock()
	cacheMu.Lock()
	if len(cache) >= cacheEntries {
		for key := range cache { // drop one entry; its code is freed once unused
			delete(cache, key)
			break
		}
	}
	if cacheEntries > 0 {
		cache[string(*kb)] = k
	}
	cacheMu.Unlock()
	log.Trace("compiled", "size", ir.Size, "ns", ns)
	return k, nil
}

// CompileTime generates native code for the committed type t once, without
// the code cache and without the auto policy, discards it, and returns how
// long the generation took (planning, code generation and placement in
// executable memory). It is meant for tools and benchmarks (ddtbench's
// compile_ns). Errors: ddt.ErrNotCommitted, ddt.ErrInvalid (nil t), and
// errors wrapping ddt.ErrNotCompiled (ErrUnsupported, a declined shape).
func CompileTime(t *ddt.Type) (time.Duration, error) {
	if t == nil {
		return 0, fmt.Errorf("jit: CompileTime: nil type: %w", ddt.ErrInvalid)
	}
	ir := irOf(t)
	if ir == nil {
		return 0, fmt.Errorf("jit: CompileTime %s: %w", t.Name(), ddt.ErrNotCommitted)
	}
	_, d, err := compileFresh(ir)
	return d, err
}

// compileFresh compiles ir without the cache and the auto policy.
func compileFresh(ir *ddtir.IR) (ddtir.Kernel, time.Duration, error) {
	if err := supported(); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", err, ddt.ErrNotCompiled)
	}
	if ir == nil {
		return nil, 0, errDecline("nil IR")
	}
	if err := checkTree(ir); err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	k, err := compileIR(ir, HostFeatures())
	return k, time.Since(t0), err
}

// irOf returns the IR of a committed type (nil before Commit).
func irOf(t *ddt.Type) *ddtir.IR { return ddtir.TypeIR(t) }

var defaultCompiler = &compiler{}

// Enable registers the package's compiler with ddt (importing the package
// already does, unless WEFT_JIT=off). It returns ErrUnsupported when native
// code cannot run here; ddt then keeps its interpreter. Under WEFT_JIT=off
// (ddt.JITDisabled) registering has no effect: ddt compiles nothing.
func Enable() error { return defaultCompiler.enable() }

// enable registers c with ddt, unless its code cannot run here.
func (c *compiler) enable() error {
	if err := c.supported(); err != nil {
		return err
	}
	ddtir.SetCompiler(c)
	return nil
}

// Disable unregisters the compiler: types committed afterwards use the
// interpreter. Types already committed keep their kernels.
func Disable() { ddtir.SetCompiler(nil) }

func init() {
	if ddt.JITDisabled() {
		return
	}
	if err := Enable(); err != nil {
		log.Debug("native pack code disabled", "error", err)
	}
}
