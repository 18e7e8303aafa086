package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/ddtir"
	"github.com/weft-hpc/weft/internal/testenv"
)

// The GPU benchmark: for the layouts of the GPU datatype study, the
// generated kernel's pack against the DMA alternatives (one 2D copy, one
// copy per block), a hand-written strided-gather kernel where the layout
// is two-dimensional, and a contiguous device copy of as many bytes (the
// bandwidth reference). It runs on CUDA device 0 when there is one, else
// on OpenCL device 0 (pocl on a CPU). WEFT_GPU_BENCH_N scales the layouts
// (default 256 on CUDA, 96 on OpenCL).
//
//	go test -run '^$' -bench Layouts -count 5 ./gpu

// benchDevice opens the device the benchmarks run on.
func benchDevice(b *testing.B) *Device {
	d, err := OpenCUDA(0)
	if err != nil {
		d, err = OpenOpenCL(0)
	}
	if errors.Is(err, errs.ErrNotSupported) {
		testenv.Skip(b, "opencl", "no CUDA or OpenCL device: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	d.method = MethodKernel // "auto" sub-benchmarks choose the cost model
	return d
}

// closeBench closes a benchmark's device with the timer stopped: closing
// a CUDA context takes tens of milliseconds, which a benchmark of few
// iterations would otherwise count in every one.
func closeBench(b *testing.B, d *Device) {
	b.StopTimer()
	d.Close()
}

// dmaBackend is implemented by the runtimes that have the DMA baselines.
type dmaBackend interface {
	copy2D(dst mem, dpitch int64, src mem, soff, spitch, width, height int64) error
	copies(dst, src mem, offs, lens []int64, at int64) error
}

// benchLayouts are the study's layouts at scale n: a vector of 8-byte
// blocks, the three faces of an n³ float64 array, a struct array and an
// indexed type.
func benchLayouts(n int) []struct {
	name string
	t    *ddt.Type
} {
	mk := func(t *ddt.Type, err error) *ddt.Type {
		if err != nil {
			panic(err)
		}
		if err := t.Commit(); err != nil {
			panic(err)
		}
		return t
	}
	sz := []int{n, n, n}
	face := func(sub, start []int) *ddt.Type {
		return mk(ddt.Subarray(sz, sub, start, ddt.OrderFortran, ddt.Float64))
	}
	st := mk(ddt.Struct([]int{1, 3, 2}, []int64{0, 8, 24}, []*ddt.Type{ddt.Float64, ddt.Int32, ddt.Float32}))
	rs, _ := ddt.Resized(st, 0, 40)
	idx, bl := make([]int, n*n/4), make([]int, n*n/4)
	x := 0
	for i := range idx {
		x += 1 + i%5
		idx[i], bl[i] = x, 1+i%3
		x += bl[i]
	}
	return []struct {
		name string
		t    *ddt.Type
	}{
		{"vector_8B", mk(ddt.Vector(n*n, 1, 2, ddt.Float64))},
		{"face_x", face([]int{1, n, n}, []int{n / 2, 0, 0})},
		{"face_y", face([]int{n, 1, n}, []int{0, n / 2, 0})},
		{"face_z", face([]int{n, n, 1}, []int{0, 0, n / 2})},
		{"struct", mk(ddt.Contiguous(n*n/2, rs))},
		{"indexed", mk(ddt.Indexed(bl, idx, ddt.Float32))},
	}
}

// twoD describes a plan that is one strided set of equal blocks: one loop
// level over one block, one element.
func (p *Plan) twoD() (disp, width, pitch, height int64, ok bool) {
	if len(p.levels) != 1 || p.list || p.levels[0].tab >= 0 || p.levels[0].stride < p.unit {
		return 0, 0, 0, 0, false
	}
	return p.disp, p.unit, p.levels[0].stride, p.levels[0].count, true
}

// handPTX and handCL are hand-written strided gathers of 8-byte words, as
// an application would write them: runtime block and stride (in words,
// packed into q0), one 32-bit division and remainder per word.
const handPTX = `.version 7.8
.target sm_80
.address_size 64
.visible .entry hand_gather(.param .u64 typed, .param .u64 packed, .param .u64 tab, .param .u64 q0, .param .u64 n)
{
	.reg .pred %p<3>;
	.reg .b32 %r<14>;
	.reg .b64 %rd<12>;
	ld.param.u64 %rd1, [typed];
	ld.param.u64 %rd2, [packed];
	ld.param.u64 %rd3, [q0];
	ld.param.u64 %rd4, [n];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	cvt.u32.u64 %r1, %rd3;
	shr.u64 %rd5, %rd3, 32;
	cvt.u32.u64 %r2, %rd5;
	cvt.u32.u64 %r3, %rd4;
	mov.u32 %r4, %tid.x;
	mov.u32 %r5, %ntid.x;
	mov.u32 %r6, %ctaid.x;
	mov.u32 %r7, %nctaid.x;
	mad.lo.u32 %r8, %r6, %r5, %r4;
	mul.lo.u32 %r9, %r5, %r7;
	setp.ge.u32 %p1, %r8, %r3;
	@%p1 bra DONE;
LOOP:
	div.u32 %r10, %r8, %r1;
	rem.u32 %r11, %r8, %r1;
	mad.lo.u32 %r12, %r10, %r2, %r11;
	mul.wide.u32 %rd6, %r12, 8;
	add.s64 %rd7, %rd1, %rd6;
	ld.global.nc.u64 %rd8, [%rd7];
	mul.wide.u32 %rd9, %r8, 8;
	add.s64 %rd10, %rd2, %rd9;
	st.global.u64 [%rd10], %rd8;
	add.s32 %r8, %r8, %r9;
	setp.lt.u32 %p2, %r8, %r3;
	@%p2 bra LOOP;
DONE:
	ret;
}
`

const handCL = `__kernel void hand_gather(__global uchar *typed, long toff, __global uchar *packed, long poff,
		__global const long *tab, ulong q0, ulong n)
{
	uint blk = (uint)q0, stride = (uint)(q0 >> 32);
	__global const ulong *in = (__global const ulong *)(typed + toff);
	__global ulong *out = (__global ulong *)(packed + poff);
	for (uint i = get_global_id(0); i < (uint)n; i += get_global_size(0))
		out[i] = in[(i / blk) * stride + i % blk];
}
`

func benchN(d *Device) int {
	if v, err := strconv.Atoi(os.Getenv("WEFT_GPU_BENCH_N")); err == nil && v > 0 {
		return v
	}
	if d.Kind() == "cuda" {
		return 256
	}
	return 96
}

// BenchmarkLayouts packs each layout device to device with every method.
func BenchmarkLayouts(b *testing.B) {
	d := benchDevice(b)
	defer closeBench(b, d)
	ctx := context.Background()
	hsrc := handCL
	if d.be.language() == langPTX {
		hsrc = handPTX
	}
	hand, err := d.be.build(hsrc, []string{"hand_gather"})
	if err != nil {
		b.Fatal(err)
	}
	dma := d.be.(dmaBackend)
	for _, l := range benchLayouts(benchN(d)) {
		p, err := PlanOf(l.t)
		if err != nil {
			b.Fatal(err)
		}
		n0, b0 := ddttest.Layout(l.t, 1)
		base := b0 - 3 + 256 // Layout leaves 3 bytes of slack: align the origin
		n := n0 - int(b0) + int(base)
		typed, err := d.Alloc(int64(n))
		if err != nil {
			b.Fatal(err)
		}
		host := make([]byte, n)
		ddtFill(host)
		typed.Write(0, host)
		size := l.t.Size()
		packed, err := d.Alloc(size)
		if err != nil {
			b.Fatal(err)
		}
		src := Typed{Type: l.t, Buf: typed, Base: base, Count: 1}
		want := ddttest.Pack(l.t, host, base, 1)
		run := func(name string, f func() error) {
			b.Run(l.name+"/"+name, func(b *testing.B) {
				b.SetBytes(size)
				packed.Write(0, make([]byte, size))
				if err := f(); err != nil { // warm: build, first launch
					b.Fatal(err)
				}
				got := make([]byte, size)
				packed.Read(0, got)
				if name != "memcpy" && string(got) != string(want) {
					b.Fatalf("%s/%s packed wrong bytes", l.name, name)
				}
				b.ResetTimer()
				for range b.N {
					if err := f(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		run("kernel", func() error { _, err := d.Pack(ctx, packed, 0, src, 0, size); return err })
		// The cost model's choice (calibrated on the first pack), through
		// Pack as messages use it.
		d.SetMethod(MethodAuto)
		before := d.Stats()
		run("auto", func() error { _, err := d.Pack(ctx, packed, 0, src, 0, size); return err })
		after := d.Stats()
		chose := MethodKernel
		if after.Rects > before.Rects {
			chose = MethodRect
		} else if after.BlockDMA > before.BlockDMA {
			chose = MethodBlocks
		}
		b.Logf("%s: the cost model chose %v (%v)", l.name, chose, d.cost)
		d.SetMethod(MethodKernel)
		if disp, w, pitch, h, ok := p.twoD(); ok {
			run("copy2d", func() error { return dma.copy2D(packed.m, w, typed.m, base+disp, pitch, w, h) })
			if w%8 == 0 && pitch%8 == 0 && (base+disp)%8 == 0 {
				tab, _ := d.table(p)
				a := launchArgs{typed: typed.m, toff: base + disp, packed: packed.m, tab: tab,
					q0: uint64(w/8) | uint64(pitch/8)<<32, n: uint64(size / 8), block: [3]int{d.block, 1, 1}}
				a.grid = [3]int{int(min((int64(a.n)+int64(d.block)-1)/int64(d.block), int64(d.maxGrid))), 1, 1}
				run("hand", func() error { return d.be.launch(hand[0], a) })
			}
		}
		var offs, lens []int64
		for _, e := range ddttest.TypeMap(l.t) {
			if k := len(offs) - 1; k >= 0 && offs[k]+lens[k] == base+e.Disp {
				lens[k] += e.Size
				continue
			}
			offs, lens = append(offs, base+e.Disp), append(lens, e.Size)
		}
		run(fmt.Sprintf("blocks_%d", len(offs)), func() error { return dma.copies(packed.m, typed.m, offs, lens, 0) })
		run("memcpy", func() error { return dma.copies(packed.m, typed.m, []int64{0}, []int64{size}, 0) })
		typed.Free()
		packed.Free()
	}
}

// jitLeveler is implemented by the runtimes whose compiler takes an
// optimisation level (CUDA's PTX JIT): setJITOptLevel sets it for later
// builds, -1 for the driver's default. For measurement only.
type jitLeveler interface{ setJITOptLevel(level int) }

// BenchmarkBuild times what a new type costs before its first launch,
// without any cache: lowering the IR to a plan under a fresh key (a new
// plan, kernel names and text each iteration, so neither this package's
// caches nor a compiler's disk cache of sources can answer), emitting the
// kernel text and building it with the device's compiler (the CUDA
// driver's PTX JIT, or the OpenCL compiler).
//
//	go test -run '^$' -bench Build -benchtime 200x ./gpu
//
// Sub-benchmarks:
//   - variant: what a Device does on a type's first Pack: the module of
//     the one pack kernel that a whole-stream launch of one element takes;
//   - module: all the plan's kernels (pack and unpack, three launch splits;
//     four kernels without levels) in one module, for comparison;
//   - emit: variant without the build (lowering and the kernel's text:
//     this package's share of the cost);
//   - again: one kernel's text built over and over (a compiler's disk
//     cache answers: what a program's next run pays);
//   - empty: the compiler's floor, an empty kernel under a fresh name;
//   - variant-O1, variant-O3 (CUDA only): variant with the PTX JIT at
//     CU_JIT_OPTIMIZATION_LEVEL 1 and 3 (the driver's default is 4).
func BenchmarkBuild(b *testing.B) {
	d := benchDevice(b)
	defer closeBench(b, d)
	lay := benchLayouts(8)
	l := d.be.language()
	nonce, seq := time.Now().UnixNano(), 0
	bench := func(b *testing.B, all, build bool) {
		for range b.N {
			ir := ddtir.TypeIR(lay[seq%len(lay)].t)
			p, err := lower(ir, fmt.Sprintf("%s#%d.%d", ir, nonce, seq))
			seq++
			if err != nil {
				b.Fatal(err)
			}
			v, _, _ := d.shape(p, variant{w: p.maxWord}, 0, uint64(p.size/p.maxWord))
			ks := []variant{v}
			if all {
				ks = p.allKinds(p.maxWord)
			}
			names := make([]string, len(ks))
			for j, k := range ks {
				names[j] = p.kernelName(k)
			}
			src := p.emit(l, ks)
			if !build {
				continue
			}
			if _, err := d.be.build(src, names); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("variant", func(b *testing.B) { bench(b, false, true) })
	b.Run("module", func(b *testing.B) { bench(b, true, true) })
	b.Run("emit", func(b *testing.B) { bench(b, false, false) })
	// The same kernel text built again and again: what a program's next
	// run pays where the compiler keeps a disk cache of what it built
	// (the CUDA driver's, unless CUDA_CACHE_DISABLE=1; pocl's).
	b.Run("again", func(b *testing.B) {
		ir := ddtir.TypeIR(lay[0].t)
		p, err := lower(ir, fmt.Sprintf("%s#%d.again", ir, nonce))
		if err != nil {
			b.Fatal(err)
		}
		v, _, _ := d.shape(p, variant{w: p.maxWord}, 0, uint64(p.size/p.maxWord))
		src := p.emit(l, []variant{v})
		for range b.N {
			if _, err := d.be.build(src, []string{p.kernelName(v)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The compiler's floor: an empty kernel under a fresh name.
	b.Run("empty", func(b *testing.B) {
		for range b.N {
			name := fmt.Sprintf("weft_empty_%d_%d", nonce, seq)
			seq++
			src := "__kernel void " + name + "(void) {}\n"
			if l == langPTX {
				src = ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry " + name + "()\n{\n\tret;\n}\n"
			}
			if _, err := d.be.build(src, []string{name}); err != nil {
				b.Fatal(err)
			}
		}
	})
	if jl, ok := d.be.(jitLeveler); ok {
		for _, lv := range []int{1, 3} {
			b.Run(fmt.Sprintf("variant-O%d", lv), func(b *testing.B) {
				jl.setJITOptLevel(lv)
				defer jl.setJITOptLevel(-1)
				bench(b, false, true)
			})
		}
	}
}

// BenchmarkCacheHit times what a type already built costs before a launch:
// its plan and kernels found again (Prepare: PlanOf, then the device's
// kernel cache for the pack and the unpack kernel, and the table's).
func BenchmarkCacheHit(b *testing.B) {
	d := benchDevice(b)
	defer closeBench(b, d)
	t := benchLayouts(8)[4].t
	if err := d.Prepare(t); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := d.Prepare(t); err != nil {
			b.Fatal(err)
		}
	}
}
