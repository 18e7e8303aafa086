package gpu_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/gpu"
)

// A column of a 4×4 matrix of float64: the plan maps it to one loop level
// of 8-byte words, and its kernels are emitted as PTX and OpenCL C.
func ExampleNewPlan() {
	col, _ := ddt.Vector(4, 1, 4, ddt.Float64)
	col.Commit()
	p, err := gpu.NewPlan(col)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(p)
	ptx, _ := p.PTX(0)
	fmt.Println(len(ptx) > 0, p.MaxWord())
	// Output:
	// gpu plan size=32 extent=104 word=8 disp=0
	//   loop count=4 stride=32 child=8
	//   body block len=8
	// true 8
}

// The plan's emulator runs the kernels' index arithmetic on the CPU; it
// packs exactly what the interpreter packs, from any stream offset.
func ExamplePlan_Emulator() {
	col, _ := ddt.Vector(3, 1, 3, ddt.Uint8)
	col.Commit()
	p, _ := gpu.NewPlan(col)
	typed := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8}
	packed := make([]byte, 2)
	n, _ := p.Emulator().Pack(packed, typed, 0, 1, 1) // stream bytes [1, 3)
	fmt.Println(n, packed)
	// Output: 2 [3 6]
}

// Packing with a GPU: open a device (CUDA first, then OpenCL), copy the
// typed data in, pack on the device, read the packed bytes back.
func ExampleDevice_Pack() {
	d, err := gpu.OpenCUDA(0)
	if err != nil {
		d, err = gpu.OpenOpenCL(0)
	}
	if errors.Is(err, errs.ErrNotSupported) {
		fmt.Println("[0 1 4 5 8 9 12 13]") // no device here: what a device prints
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	pairs, _ := ddt.Vector(4, 2, 4, ddt.Uint8)
	pairs.Commit()
	typed, _ := d.Alloc(16)
	defer typed.Free()
	packed, _ := d.Alloc(8)
	defer packed.Free()
	src := make([]byte, 16)
	for i := range src {
		src[i] = byte(i)
	}
	typed.Write(0, src)
	if _, err := d.Pack(context.Background(), packed, 0, gpu.Typed{Type: pairs, Buf: typed, Count: 1}, 0, 8); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]byte, 8)
	packed.Read(0, out)
	fmt.Println(out)
	// Output: [0 1 4 5 8 9 12 13]
}

// Two halves of a packed stream enqueued back to back into mapped host
// memory, then waited for: no host synchronisation between the launches.
func ExampleDevice_PackAsync() {
	d, err := gpu.OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		fmt.Println("[0 1 4 5 8 9 12 13]") // no OpenCL device here: what one prints
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	ctx := context.Background()
	pairs, _ := ddt.Vector(4, 2, 4, ddt.Uint8)
	pairs.Commit()
	typed, _ := d.Alloc(16)
	defer typed.Free()
	src := make([]byte, 16)
	for i := range src {
		src[i] = byte(i)
	}
	typed.Write(0, src)
	wire, _ := d.AllocHost(8) // pinned, mapped into the device
	defer wire.Free()
	in := gpu.Typed{Type: pairs, Buf: typed, Count: 1}
	first, _ := d.PackAsync(ctx, wire, 0, in, 0, 4)
	second, _ := d.PackAsync(ctx, wire, 4, in, 4, 4)
	if err := errors.Join(first.Wait(ctx), second.Wait(ctx)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(wire.Bytes())
	// Output: [0 1 4 5 8 9 12 13]
}

// Comparing methods, as a benchmark does: the same pack by the kernel and
// by one 2-D copy (a vector is rows at a constant pitch); MethodAuto, the
// default, lets the device's measured cost model choose.
func ExampleDevice_SetMethod() {
	d, err := gpu.OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		fmt.Println("kernel [0 1 4 5 8 9 12 13]\nrect [0 1 4 5 8 9 12 13]") // no OpenCL device here
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	pairs, _ := ddt.Vector(4, 2, 4, ddt.Uint8)
	pairs.Commit()
	typed, _ := d.Alloc(16)
	src := make([]byte, 16)
	for i := range src {
		src[i] = byte(i)
	}
	typed.Write(0, src)
	packed, _ := d.AllocHost(8)
	for _, m := range []gpu.Method{gpu.MethodKernel, gpu.MethodRect} {
		d.SetMethod(m)
		if _, err := d.Pack(context.Background(), packed, 0, gpu.Typed{Type: pairs, Buf: typed, Count: 1}, 0, 8); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(m, packed.Bytes())
	}
	// Output:
	// kernel [0 1 4 5 8 9 12 13]
	// rect [0 1 4 5 8 9 12 13]
}

// Unpacking in place from host memory the program (or a NIC) filled: mmap
// memory mapped into the device, read by the unpack kernel without a copy.
func ExampleDevice_MapHost() {
	d, err := gpu.OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		fmt.Println("[1 2 0 0 3 4 0 0]") // no OpenCL device here: what one prints
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	wire, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer syscall.Munmap(wire)
	copy(wire, []byte{1, 2, 3, 4})
	m, err := d.MapHost(wire)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Free()
	pairs, _ := ddt.Vector(2, 2, 4, ddt.Uint8)
	pairs.Commit()
	typed, _ := d.Alloc(8)
	typed.Write(0, make([]byte, 8))
	if _, err := d.Unpack(context.Background(), gpu.Typed{Type: pairs, Buf: typed, Count: 1}, m, 0, 0, 4); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]byte, 8)
	typed.Read(0, out)
	fmt.Println(out)
	// Output: [1 2 0 0 3 4 0 0]
}

// Whether typed data needs a pack at all: a contiguous run of bytes can be
// sent from where it is.
func ExampleTyped_Contiguous() {
	d, err := gpu.OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		fmt.Println("true 8\nfalse") // no OpenCL device here: what one prints
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	buf, _ := d.Alloc(64)
	pairs, _ := ddt.Vector(4, 2, 4, ddt.Uint8)
	pairs.Commit()
	off, ok, _ := gpu.Typed{Type: ddt.Float64, Buf: buf, Base: 8, Count: 4}.Contiguous()
	fmt.Println(ok, off)
	_, ok, _ = gpu.Typed{Type: pairs, Buf: buf, Count: 1}.Contiguous()
	fmt.Println(ok)
	// Output:
	// true 8
	// false
}
