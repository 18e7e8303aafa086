//go:build cgo

package gpu

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/testenv"
)

// methodLayouts are layouts for the copy methods: rows at a constant
// pitch (12-byte elements 20 bytes apart, a vector, a face), and ones
// that are not (a struct array, an indexed type).
func methodLayouts(t *testing.T) []*ddt.Type {
	rows := must(ddt.Resized(must(ddt.Vector(1, 3, 5, ddt.Int32)), 0, 20))
	return append([]*ddt.Type{committed(t, rows)}, seedLayouts(t, 12)...)
}

// TestOpenCLMethods forces each method on pocl and checks every layout
// byte for byte against ddttest's reference (whole streams and random
// windows, guard bytes around the packed window and the typed data):
// the 2-D copy (clEnqueueCopyBufferRect) where the layout is rows, one
// copy per block where it has few, the kernel otherwise.
func TestOpenCLMethods(t *testing.T) { methodsCheck(t, openCL(t)) }

// TestCUDAMethods is TestOpenCLMethods on a CUDA device (cuMemcpy2D and
// cuMemcpyDtoD against the PTX kernels), then the cost model's choice,
// logged with its coefficients (make gpu-check).
func TestCUDAMethods(t *testing.T) {
	d := openCUDA(t)
	if d == nil {
		testenv.Skip(t, "gpu", "no CUDA device")
	}
	methodsCheck(t, d)
	d.SetMethod(MethodAuto)
	r := rand.New(rand.NewPCG(4, 4))
	for _, ty := range methodLayouts(t) {
		deviceCheck(t, d, ty, 2, r)
	}
	t.Logf("cost model: %v; %+v", d.cost, d.Stats())
}

func methodsCheck(t *testing.T, d *Device) {
	r := rand.New(rand.NewPCG(3, 9))
	for _, m := range []Method{MethodRect, MethodBlocks, MethodKernel} {
		if err := d.SetMethod(m); err != nil {
			t.Fatal(err)
		}
		before := d.Stats()
		for _, ty := range methodLayouts(t) {
			deviceCheck(t, d, ty, 3, r)
		}
		if m != MethodKernel { // random types: the copies, or the kernel where they do not apply
			for range 6 {
				ty := committed(t, ddttest.RandomType(r, 3))
				if _, err := PlanOf(ty); err == nil {
					deviceCheck(t, d, ty, 1+r.IntN(3), r)
				}
			}
		}
		st := d.Stats()
		t.Logf("%v: %d rects, %d block copies, %d launches", m, st.Rects-before.Rects, st.BlockDMA-before.BlockDMA, st.Launches-before.Launches)
		switch m {
		case MethodRect:
			if st.Rects == before.Rects {
				t.Fatalf("MethodRect: no 2-D copy ran")
			}
		case MethodBlocks:
			if st.BlockDMA == before.BlockDMA {
				t.Fatalf("MethodBlocks: no per-block copies ran")
			}
		case MethodKernel:
			if st.Rects != before.Rects || st.BlockDMA != before.BlockDMA {
				t.Fatalf("MethodKernel ran copies: %+v then %+v", before, st)
			}
		}
	}
	if err := d.SetMethod(Method(9)); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("SetMethod(9): %v", err)
	}
}

// TestOpenCLMethodAuto: the cost model is measured once on first need,
// within a bounded time, and its choice packs the right bytes; a rect
// job covers partial first and last rows.
func TestOpenCLMethodAuto(t *testing.T) {
	d := openCL(t)
	d.SetMethod(MethodAuto)
	r := rand.New(rand.NewPCG(4, 4))
	for _, ty := range methodLayouts(t) {
		deviceCheck(t, d, ty, 2, r)
	}
	c := d.cost
	if c == nil {
		t.Fatal("no cost model after packs of row layouts")
	}
	if c.kByte <= 0 && c.kFix <= 0 || c.cFix <= 0 {
		t.Fatalf("cost model not measured: %v", c)
	}
	st := d.Stats()
	t.Logf("cost model: %v; chose %d rects, %d block copies, %d kernels", c, st.Rects, st.BlockDMA, st.Launches)
	// The choice follows the model: with the kernel priced high the
	// rows take the 2-D copy and the struct array (not rows, few blocks)
	// one copy per block; with copies priced high both take the kernel;
	// a layout of more blocks than copies may take always does.
	rows, sts, vec := methodLayouts(t)[0], seedLayouts(t, 4)[3], seedLayouts(t, 64)[0]
	for _, c := range []struct {
		model     costModel
		rows, sts Method
	}{
		{costModel{kFix: 1, cFix: 1e-6, rFix: 1e-6}, MethodRect, MethodBlocks},
		{costModel{kFix: 1e-6, cFix: 1, rFix: 1}, MethodKernel, MethodKernel},
	} {
		d.mu.Lock()
		d.cost = &c.model
		for _, x := range []struct {
			ty   *ddt.Type
			want Method
		}{{rows, c.rows}, {sts, c.sts}, {vec, MethodRect}} {
			n, _ := ddttest.Layout(x.ty, 2)
			p, _ := PlanOf(x.ty)
			job := d.chooseDMA(p, Typed{Type: x.ty, Buf: &Buffer{n: int64(n)}, Count: 2}, 0, 2*x.ty.Size(), 0)
			got := MethodKernel
			if job != nil {
				got = job.m
			}
			if x.ty == vec { // 4096 blocks: never per-block copies
				if got == MethodBlocks {
					t.Errorf("%v: %v", x.ty, got)
				}
				continue
			}
			if got != x.want {
				t.Errorf("model %v, %v: chose %v, want %v", c.model, x.ty, got, x.want)
			}
		}
		d.mu.Unlock()
	}
	p, _ := PlanOf(rows)
	first, width, pitch, n, ok := p.rows(0, 1000)
	if !ok || width != 12 || pitch != 20 || n != 1000 {
		t.Fatalf("rows of 12-byte elements: %d %d %d %d %v", first, width, pitch, n, ok)
	}
	j := rectJob(first, width, pitch, 5, 12*10+3, 100)
	if j.rows != 9 || len(j.lens) != 2 || j.lens[0] != 7 || j.lens[1] != 8 || j.rowT != 20 || j.rowP != 107 || j.toffs[0] != 5 || j.toffs[1] != 200 {
		t.Fatalf("rect job of a window cut mid-row: %+v", j)
	}
}

// TestOpenCLMapHost maps mmap memory into the device and packs into it and
// unpacks from it in place; the unpack hands the host's bytes to the
// device first (a map for writing and its unmap); Free unmaps it and
// leaves the memory alone; Close frees what is left; Bytes of a freed
// buffer is nil.
func TestOpenCLMapHost(t *testing.T) { mapHostCheck(t, openCL(t)) }

// TestCUDAMapHost is TestOpenCLMapHost on a CUDA device
// (cuMemHostRegister with DEVICEMAP, the kernels on its device pointer).
func TestCUDAMapHost(t *testing.T) {
	d := openCUDA(t)
	if d == nil {
		testenv.Skip(t, "gpu", "no CUDA device")
	}
	mapHostCheck(t, d)
}

func mapHostCheck(t *testing.T, d *Device) {
	ctx := context.Background()
	ty := seedLayouts(t, 16)[3]
	n, base := ddttest.Layout(ty, 2)
	host := make([]byte, n)
	for i := range host {
		host[i] = byte(i * 13)
	}
	typed, err := d.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	typed.Write(0, host)
	want := ddttest.Pack(ty, host, base, 2)
	mm, err := syscall.Mmap(-1, 0, len(want)+8192, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mm)
	hb, err := d.MapHost(mm)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Stats().Buffers; got != 2 {
		t.Fatalf("%d live buffers, want 2", got)
	}
	if _, err := d.Pack(ctx, hb, 4096, Typed{ty, typed, base, 2}, 0, int64(len(want))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mm[4096:4096+len(want)], want) {
		t.Fatal("pack into mapped mmap memory differs")
	}
	for i := range want {
		mm[i] = want[len(want)-1-i]
	}
	zero := make([]byte, n)
	typed.Write(0, zero)
	cb, isCL := d.be.(*clBackend)
	var pub int64
	if isCL {
		pub = cb.published
	}
	if _, err := d.Unpack(ctx, Typed{ty, typed, base, 2}, hb, 0, 0, int64(len(want))); err != nil {
		t.Fatal(err)
	}
	if isCL && cb.published == pub {
		t.Fatal("the unpack read host memory without handing it to the device (map for writing, unmap)")
	}
	got := make([]byte, n)
	typed.Read(0, got)
	if !bytes.Equal(got, ddttest.UnpackRange(ty, zero, mm[:len(want)], base, 2, 0)) {
		t.Fatal("unpack from mapped mmap memory differs")
	}
	if err := hb.Free(); err != nil {
		t.Fatal(err)
	}
	mm[0] = 1 // still the caller's memory
	if hb.Bytes() != nil {
		t.Fatal("Bytes of a freed mapping is not nil")
	}
	if _, err := d.MapHost(nil); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("MapHost(nil): %v", err)
	}
	left, err := d.AllocHost(100)
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Bytes()) != 100 {
		t.Fatalf("AllocHost(100): %d bytes", len(left.Bytes()))
	}
	d.Close()
	if got := d.Stats().Buffers; got != 0 {
		t.Fatalf("%d buffers left after Close", got)
	}
	if left.Bytes() != nil { // Close freed it: no view of freed memory
		t.Fatal("Bytes of a buffer Close freed is not nil")
	}
	if err := typed.Free(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Free after Close: %v", err)
	}
}

// brokenDMA is the PTX simulator with copies that always fail.
type brokenDMA struct{ *simBackend }

var errBrokenDMA = errors.New("copy engine broken")

func (brokenDMA) rect(dst mem, doff, dpitch int64, src mem, soff, spitch, width, height int64) error {
	return errBrokenDMA
}
func (brokenDMA) copyList(dst, src mem, doffs, soffs, lens []int64) error { return errBrokenDMA }

// TestMethodCalibrationFails: a device whose copies fail to calibrate
// packs every layout by its kernel (the simulated PTX), byte for byte,
// and says why in its cost model.
func TestMethodCalibrationFails(t *testing.T) {
	d := newDevice(brokenDMA{&simBackend{next: 1 << 32}})
	d.block, d.maxGrid = 32, 3
	r := rand.New(rand.NewPCG(6, 1))
	deviceCheck(t, d, methodLayouts(t)[0], 5, r)
	if d.cost == nil || !errors.Is(d.cost.err, errBrokenDMA) {
		t.Fatalf("cost model %v, want the calibration's error", d.cost)
	}
	if st := d.Stats(); st.Rects != 0 || st.BlockDMA != 0 || st.Launches == 0 {
		t.Fatalf("stats %+v: want kernels only", st)
	}
	t.Log(d.cost)
}

// TestOpenCLMapHostGoMemory: Go memory passed to MapHost by mistake is
// pinned while mapped: the device packs into it across collections and
// Free unpins it (runtime.Pinner panics on a pin left behind).
func TestOpenCLMapHostGoMemory(t *testing.T) {
	d := openCL(t)
	defer d.Close()
	ty := seedLayouts(t, 16)[3]
	n, base := ddttest.Layout(ty, 1)
	host := make([]byte, n)
	for i := range host {
		host[i] = byte(i*3 + 1)
	}
	typed, err := d.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	typed.Write(0, host)
	want := ddttest.Pack(ty, host, base, 1)
	gomem := make([]byte, len(want))
	hb, err := d.MapHost(gomem)
	if err != nil {
		t.Fatal(err)
	}
	if hb.pin == nil {
		t.Fatal("Go memory mapped without a pin")
	}
	runtime.GC()
	if _, err := d.Pack(context.Background(), hb, 0, Typed{ty, typed, base, 1}, 0, int64(len(want))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gomem, want) {
		t.Fatal("pack into mapped Go memory differs")
	}
	if err := hb.Free(); err != nil {
		t.Fatal(err)
	}
	if hb.pin != nil {
		t.Fatal("Free left the pin")
	}
	runtime.GC()
}
