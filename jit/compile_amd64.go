package jit

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/ddtir"
)

var (
	probeOnce sync.Once
	probeErr  error
)

// supported reports whether generated code can run: it maps, seals and calls
// one ret instruction once per process.
func supported() error {
	probeOnce.Do(func() {
		m, err := newCode([]byte{0xc3}, defaultConfig.dualMap)
		if err != nil {
			probeErr = fmt.Errorf("%w: %w", ErrUnsupported, err)
			return
		}
		var a callArgs
		callCode(uintptr(unsafe.Pointer(&m.mem[0])), &a)
		m.release()
	})
	return probeErr
}

// compileIR compiles ir for f with the default configuration.
func compileIR(ir *ddtir.IR, f Features) (ddtir.Kernel, error) {
	return compileWith(ir, f, defaultConfig)
}

// compileWith compiles ir for f with the configuration cfg.
func compileWith(ir *ddtir.IR, f Features, cfg *config) (ddtir.Kernel, error) {
	if ir == nil || ir.Root == nil || ir.Size == 0 {
		return nil, errDecline("empty type")
	}
	if ir.Contig {
		return contigKernel{ir: ir, chunk: cfg.chunkBytes}, nil
	}
	p, err := newPlan(ir, cfg)
	if err != nil {
		return nil, err
	}
	if p.bigBody {
		return newSeq(p, f)
	}
	return compilePlan(p, f)
}

// compilePlan generates, maps and seals the code of p.
func compilePlan(p *plan, f Features) (*kernel, error) {
	p.tr.useRegTile(f, p.cfg)
	code, e, a, err := generate(p, f)
	if err != nil {
		asmPool.Put(a)
		return nil, fmt.Errorf("jit: encode: %w", err)
	}
	m, err := newCode(code, p.cfg.dualMap)
	if cap(code) <= 1<<20 { // keep buffers of ordinary size only
		asmPool.Put(a)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ddt.ErrNotCompiled)
	}
	base := uintptr(unsafe.Pointer(&m.mem[0]))
	k := &kernel{p: p, code: m, pack: base + uintptr(e.pack), unpack: base + uintptr(e.unpack), budget: p.cfg.chunkBytes,
		ntPack: p.cfg.regTileNTMin, ntUnpack: p.cfg.regTileUNTMin}
	if e.tpack >= 0 {
		k.tpack, k.tunpack = base+uintptr(e.tpack), base+uintptr(e.tunpack)
	}
	k.setup()
	if e.tpackNT >= 0 {
		k.tpackNT, k.tunpackNT = base+uintptr(e.tpackNT), base+uintptr(e.tunpackNT)
	}
	if e.tpackN >= 0 {
		k.tpackN, k.tunpackN = base+uintptr(e.tpackN), base+uintptr(e.tunpackN)
	}
	runtime.AddCleanup(k, func(m *codeMem) { m.release() }, m)
	return k, nil
}

// contigKernel packs contiguous types: one copy, in chunks so a huge pack
// still returns to Go (memmove is not preemptible either).
type contigKernel struct {
	ir    *ddtir.IR
	chunk int64 // bytes per copy (config.chunkBytes)
}

func (c contigKernel) run(packed, typed []byte, base int64, count int, from int64, pack bool) int {
	n := min(int64(len(packed)), int64(count)*c.ir.Size-from)
	if n <= 0 {
		return 0
	}
	t := typed[base+c.ir.TrueLB+from:]
	for done := int64(0); done < n; {
		k := min(n-done, c.chunk)
		if pack {
			copy(packed[done:done+k], t[done:done+k])
		} else {
			copy(t[done:done+k], packed[done:done+k])
		}
		done += k
	}
	return int(n)
}

// Pack implements ddtir.Kernel.
func (c contigKernel) Pack(packed, typed []byte, base int64, count int, from int64) (int, error) {
	return c.run(packed, typed, base, count, from, true), nil
}

// Unpack implements ddtir.Kernel.
func (c contigKernel) Unpack(typed, packed []byte, base int64, count int, from int64) (int, error) {
	return c.run(packed, typed, base, count, from, false), nil
}
