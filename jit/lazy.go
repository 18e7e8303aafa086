package jit

import (
	"sync"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/checked"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// lazyKernel implements the auto policy: walk in Go until the type has moved
// cfg.autoBlocks blocks (WEFT_TUNE jitauto) (counting the current call, so one big pack compiles at
// once), then compile once and switch to native code.
type lazyKernel struct {
	ir     *ddtir.IR
	cfg    *config
	work   atomic.Int64
	native atomic.Pointer[ddtir.Kernel]
	once   sync.Once
	failed atomic.Bool
}

func newLazy(ir *ddtir.IR, cfg *config) (ddtir.Kernel, error) {
	if _, err := newPlan(ir, cfg); err != nil { // decline unsupported shapes at Commit
		return nil, err
	}
	return &lazyKernel{ir: ir, cfg: cfg}, nil
}

func (l *lazyKernel) run(packed, typed []byte, base int64, count int, from int64, pack bool) (int, error) {
	ir := l.ir
	n := min(int64(len(packed)), int64(count)*ir.Size-from)
	if n <= 0 {
		return 0, nil
	}
	// Count this call's blocks first: a single large pack pays for the
	// compilation by itself, so it already runs native code.
	if l.native.Load() == nil && !l.failed.Load() && l.work.Add(callBlocks(n, ir, l.cfg.autoBlocks)) >= l.cfg.autoBlocks {
		l.once.Do(func() {
			k, err := compileWith(ir, HostFeatures(), l.cfg)
			if err != nil {
				log.Debug("deferred compile failed; staying interpreted", "error", err)
				l.failed.Store(true)
				return
			}
			l.native.Store(&k)
		})
	}
	if k := l.native.Load(); k != nil {
		if pack {
			return (*k).Pack(packed, typed, base, count, from)
		}
		return (*k).Unpack(typed, packed, base, count, from)
	}
	el := ddtir.Node{Op: ddtir.OpLoop, Count: int64(count), Stride: ir.Extent, Child: ir.Root, Size: int64(count) * ir.Size}
	walk(&el, base, from, from+n, packed, typed, pack)
	return int(n), nil
}

// Native implements ddtir.Deferred: whether the native code exists now.
func (l *lazyKernel) Native() bool { return l.native.Load() != nil }

// Pending implements ddtir.Deferred: native code will be generated once the
// type has moved enough data (false once it exists or its compilation
// failed).
func (l *lazyKernel) Pending() bool { return l.native.Load() == nil && !l.failed.Load() }

// callBlocks estimates the blocks moved by a call of n stream bytes:
// n × Blocks / Size + 1, capped at autoBlocks (the product may not fit in
// an int64).
func callBlocks(n int64, ir *ddtir.IR, autoBlocks int64) int64 {
	b, ok := checked.Mul(n, ir.Root.Blocks)
	if !ok {
		return max(autoBlocks, 1)
	}
	return min(b/ir.Size+1, max(autoBlocks, 1))
}

// Pack implements ddtir.Kernel.
func (l *lazyKernel) Pack(packed, typed []byte, base int64, count int, from int64) (int, error) {
	return l.run(packed, typed, base, count, from, true)
}

// Unpack implements ddtir.Kernel.
func (l *lazyKernel) Unpack(typed, packed []byte, base int64, count int, from int64) (int, error) {
	return l.run(packed, typed, base, count, from, false)
}
