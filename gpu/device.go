package gpu

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/ddtir"
	"github.com/weft-hpc/weft/internal/devhook"
)

// backend is what a Device needs from a GPU runtime: the CUDA driver API
// (cuda.go) or OpenCL (opencl_rt.go). Tests add a simulated one that runs
// the PTX through internal/ptxsim. Every method is called with the
// Device's lock held, so a backend needs no locking of its own.
type backend interface {
	kind() string     // "cuda", "opencl"
	describe() string // the device's name and version
	integrated() bool // the device shares the host's memory
	language() lang
	alloc(n int64, host bool) (mem, error)
	free(m mem) error
	write(m mem, off int64, p []byte) error
	read(m mem, off int64, p []byte) error
	// build compiles a module's source and returns its kernels, in the
	// order of names.
	build(src string, names []string) ([]any, error)
	// launch runs one kernel to completion.
	launch(f any, a launchArgs) error
	close() error
}

// copier is implemented by the runtimes that copy device memory: copies
// copies len(offs) blocks of src (offsets offs, lengths lens) one after the
// other into dst starting at byte at.
type copier interface {
	copies(dst, src mem, offs, lens []int64, at int64) error
}

// mem is one allocation of a backend.
type mem struct {
	h    any    // the backend's handle
	addr uint64 // the device address (for alignment and CUDA parameters)
	host []byte // mapped host memory: the Go view (nil for device memory)
	// borrowed: host memory of someone else's, mapped by MapHost (free
	// unmaps it and leaves the memory alone).
	borrowed bool
}

// launchArgs are a kernel's arguments and launch shape.
type launchArgs struct {
	typed  mem
	toff   int64 // byte of typed holding displacement 0 of element 0
	packed mem
	poff   int64 // byte of packed holding the window's first byte
	tab    mem
	q0, n  uint64
	grid   [3]int // blocks per dimension
	block  [3]int // threads per block per dimension
	unpack bool
	nbytes int64 // packed-stream bytes the launch moves
}

// written is the buffer the kernel writes.
func (a launchArgs) written() mem {
	if a.unpack {
		return a.typed
	}
	return a.packed
}

// asyncer is implemented by the runtimes with streams: launchAsync
// enqueues a kernel without waiting for it and returns an event that
// completes once the kernel is done and its writes to host memory are
// visible to the host; query polls it, wait blocks on it, release frees
// it (after it completed). query, wait and release may be called
// without the Device's lock (the runtimes' own calls are thread-safe).
type asyncer interface {
	launchAsync(f any, a launchArgs) (any, error)
	query(ev any) (bool, error)
	wait(ev any) error
	release(ev any)
}

// A Device packs and unpacks typed data that lives in its memory, with
// kernels generated from each type's plan. Its methods are safe for
// concurrent use; launches are serialised and synchronous.
type Device struct {
	mu      sync.Mutex
	be      backend
	closed  bool
	kerns   map[kernKey]any // built kernels (kernel)
	tabs    map[*Plan]mem
	block   int // threads per block
	maxGrid int // blocks per launch (the kernels loop over the rest)
	stats   Stats
	ordinal int // the CUDA device number (CUDA devices)
	// stageBuf is PackBytes' and UnpackBytes' host buffer (stageMu).
	stageMu  sync.Mutex
	stageBuf *Buffer
	// forceWide runs the 64-bit element split whatever the window, grid1D
	// the 1-D launch where the 3-D one fits (tests).
	forceWide, grid1D bool
	// bufs are the live buffers, freed by Close.
	bufs map[*Buffer]struct{}
	// method forces how non-contiguous data moves (SetMethod); cost is
	// the cost model, measured on first need (method.go).
	method Method
	cost   *costModel
	// hooks run first in Close, before the memory is freed (onClose);
	// hookID numbers them.
	hooks  map[int]func()
	hookID int
}

func init() {
	devhook.OnClose = func(d any, fn func()) (func(), bool) { return d.(*Device).onClose(fn) }
}

// onClose registers fn to run first in Close, before any memory is freed
// (internal/devhook.OnClose); ok is false when d is closed already.
func (d *Device) onClose(fn func()) (remove func(), ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return func() {}, false
	}
	if d.hooks == nil {
		d.hooks = map[int]func(){}
	}
	d.hookID++
	id := d.hookID
	d.hooks[id] = fn
	return func() {
		d.mu.Lock()
		delete(d.hooks, id)
		d.mu.Unlock()
	}, true
}

// kernKey names one built kernel: plan p's variant v (word size,
// direction, split).
type kernKey struct {
	p *Plan
	v variant
}

// Stats counts a Device's work.
type Stats struct {
	// Builds counts the kernels compiled: each is built alone, as a module
	// (CUDA) or program (OpenCL) of its own, on the first launch that needs
	// it (or by Prepare). A kernel is one plan, word size, direction and
	// launch split, so a new type's first Pack builds one.
	Builds    int64
	CacheHits int64 // launches (and Prepare's look-ups) whose kernel was already built
	Launches  int64
	Copies    int64 // contiguous packs and unpacks done by one device copy
	Async     int64 // launches enqueued without waiting (PackAsync, UnpackAsync)
	Rects     int64 // packs and unpacks done by one 2-D copy (MethodRect)
	BlockDMA  int64 // packs and unpacks done by one copy per block (MethodBlocks)
	Buffers   int64 // buffers allocated or mapped and not yet freed
}

func newDevice(be backend) *Device {
	return &Device{be: be, kerns: map[kernKey]any{}, tabs: map[*Plan]mem{}, block: 256, maxGrid: 8192,
		bufs: map[*Buffer]struct{}{}}
}

// errNoDevice is wrapped by calls on a nil or zero Device, which only
// OpenCUDA and OpenOpenCL make.
var errNoDevice = fmt.Errorf("gpu: a nil or zero Device (OpenCUDA and OpenOpenCL make them): %w", errs.ErrInvalid)

// errNoBuffer is wrapped by calls with a nil or zero Buffer, which only a
// Device's Alloc, AllocHost and MapHost make.
var errNoBuffer = fmt.Errorf("gpu: a nil or zero Buffer (a Device's Alloc, AllocHost and MapHost make them): %w", errs.ErrInvalid)

// ok reports whether d was made by OpenCUDA or OpenOpenCL.
func (d *Device) ok() bool { return d != nil && d.be != nil }

// ok reports whether b was made by a Device.
func (b *Buffer) ok() bool { return b != nil && b.d != nil }

// Kind returns the runtime behind the device: "cuda" or "opencl" ("" for
// a nil Device).
func (d *Device) Kind() string {
	if !d.ok() {
		return ""
	}
	return d.be.kind()
}

// String describes the device.
func (d *Device) String() string {
	if !d.ok() {
		return "gpu: no device"
	}
	return d.be.kind() + ": " + d.be.describe()
}

// Integrated reports whether the device shares the host's memory (a CPU
// OpenCL device such as pocl, an integrated GPU), as its runtime says
// (CU_DEVICE_ATTRIBUTE_INTEGRATED, CL_DEVICE_HOST_UNIFIED_MEMORY). There
// kernels read host memory mapped into the device (MapHost) as they read
// their own; a discrete GPU reads it across the bus.
func (d *Device) Integrated() bool { return d.ok() && d.be.integrated() }

// Stats returns the device's counters.
func (d *Device) Stats() Stats {
	if !d.ok() {
		return Stats{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// ErrClosed is wrapped by every call on a closed Device or a freed Buffer.
var ErrClosed = fmt.Errorf("gpu: %w", errs.ErrClosed)

// Close releases the device's modules, tables and runtime context, and
// frees the buffers still allocated (their later calls return ErrClosed,
// so nothing a package above keeps on the device outlives it); later
// calls on the device return ErrClosed. The packages that keep the
// device's memory registered with libfabric or mapped (endpoint,
// onesided) are told first: their operations on the device end with
// ErrClosed, they wait (bounded) for the network operations posted on its
// memory and close their registrations; only then is the memory freed
// (docs/gpu.md). A second Close, also one concurrent with the first,
// returns nil at once.
func (d *Device) Close() error {
	if !d.ok() {
		return errNoDevice
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true // new calls fail from here; the runtime stays up for the hooks
	hooks := make([]func(), 0, len(d.hooks))
	for id := 1; id <= d.hookID; id++ { // in the order they were registered
		if fn, ok := d.hooks[id]; ok {
			hooks = append(hooks, fn)
		}
	}
	d.hooks = nil
	d.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
	d.stageMu.Lock() // lock order: stageMu, then mu (viaStage packs under stageMu)
	defer d.stageMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	for b := range d.bufs {
		b.release()
	}
	d.bufs = nil
	d.stats.Buffers = 0
	for _, m := range d.tabs {
		d.be.free(m)
	}
	d.tabs, d.kerns = nil, nil
	return d.be.close()
}

// A Buffer is memory of a Device: device memory (Alloc) or pinned host
// memory mapped into the device's address space (AllocHost), which a
// kernel writes directly and the host (or a NIC) reads without a copy.
type Buffer struct {
	d *Device
	m mem
	n int64
	// freed is set under the device's mu; Bytes reads it without.
	freed atomic.Bool
	pin   *runtime.Pinner // MapHost's pin of Go memory, undone when freed
}

// release frees b's memory (d.mu held).
func (b *Buffer) release() error {
	b.freed.Store(true)
	if b.pin != nil {
		defer b.pin.Unpin() // once the runtime no longer holds it
		b.pin = nil
	}
	return b.d.be.free(b.m)
}

// Alloc allocates n bytes of device memory.
func (d *Device) Alloc(n int64) (*Buffer, error) { return d.alloc(n, false) }

// AllocHost allocates n bytes of pinned host memory mapped into the
// device's address space; Bytes returns the host's view of it.
func (d *Device) AllocHost(n int64) (*Buffer, error) { return d.alloc(n, true) }

func (d *Device) alloc(n int64, host bool) (*Buffer, error) {
	if !d.ok() {
		return nil, errNoDevice
	}
	if n <= 0 {
		return nil, fmt.Errorf("gpu: Alloc(%d): %w", n, errs.ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	m, err := d.be.alloc(n, host)
	if err != nil {
		return nil, err
	}
	return d.adopt(m, n), nil
}

// adopt makes m a live Buffer of d; d.mu is held.
func (d *Device) adopt(m mem, n int64) *Buffer {
	b := &Buffer{d: d, m: m, n: n}
	d.bufs[b] = struct{}{}
	d.stats.Buffers++
	return b
}

// hostMapper is implemented by the runtimes that map existing host
// memory into the device.
type hostMapper interface {
	mapHost(p []byte) (mem, error)
}

// MapHost maps p, host memory that is not Go memory (C or mmap memory,
// such as a libfabric domain's registered buffers), into the device's
// address space, so kernels read and write it in place: on CUDA
// cuMemHostRegister (PORTABLE|DEVICEMAP) and its device pointer, on OpenCL
// a CL_MEM_USE_HOST_PTR buffer over it (page-aligned memory avoids a copy
// in the runtime). p must stay valid and must not be freed until the
// Buffer is freed; Free unmaps it and leaves the memory to its owner.
// Go memory passed by mistake is pinned (runtime.Pinner) until then, so
// the runtime never keeps a pointer the garbage collector may free.
// Bytes returns p. Errors wrap errs.ErrInvalid for empty memory,
// errs.ErrNotSupported for a runtime that cannot map host memory.
func (d *Device) MapHost(p []byte) (*Buffer, error) {
	if !d.ok() {
		return nil, errNoDevice
	}
	if len(p) == 0 {
		return nil, fmt.Errorf("gpu: MapHost of no memory: %w", errs.ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	hm, ok := d.be.(hostMapper)
	if !ok {
		return nil, fmt.Errorf("gpu: %s cannot map host memory: %w", d.be.kind(), errs.ErrNotSupported)
	}
	pin := new(runtime.Pinner)
	pin.Pin(&p[0]) // a no-op for C and mmap memory
	m, err := hm.mapHost(p)
	if err != nil {
		pin.Unpin()
		return nil, err
	}
	b := d.adopt(m, int64(len(p)))
	b.pin = pin
	return b, nil
}

// Device returns the device the buffer belongs to.
func (b *Buffer) Device() *Device {
	if b == nil {
		return nil
	}
	return b.d
}

// Len returns the buffer's size in bytes.
func (b *Buffer) Len() int64 {
	if b == nil {
		return 0
	}
	return b.n
}

// Bytes returns the host view of a buffer from AllocHost or MapHost (nil
// for device memory). It is valid until Free or the device's Close; once
// the buffer is freed Bytes returns nil.
func (b *Buffer) Bytes() []byte {
	if !b.ok() || b.freed.Load() {
		return nil
	}
	return b.m.host
}

// Free releases the buffer; later calls on it return ErrClosed.
func (b *Buffer) Free() error {
	if !b.ok() {
		return errNoBuffer
	}
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if b.freed.Load() || b.d.closed {
		return ErrClosed
	}
	delete(b.d.bufs, b)
	b.d.stats.Buffers--
	return b.release()
}

func (b *Buffer) span(op string, off, n int64) error {
	if b.freed.Load() || b.d.closed {
		return ErrClosed
	}
	if off < 0 || n < 0 || off > b.n || n > b.n-off {
		return fmt.Errorf("gpu: %s of %d bytes at %d in a %d-byte buffer: %w", op, n, off, b.n, errs.ErrOutOfRange)
	}
	return nil
}

// Write copies p into the buffer at byte off.
func (b *Buffer) Write(off int64, p []byte) error {
	if !b.ok() {
		return errNoBuffer
	}
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if err := b.span("Write", off, int64(len(p))); err != nil || len(p) == 0 {
		return err
	}
	return b.d.be.write(b.m, off, p)
}

// Read copies len(p) bytes of the buffer at byte off into p.
func (b *Buffer) Read(off int64, p []byte) error {
	if !b.ok() {
		return errNoBuffer
	}
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if err := b.span("Read", off, int64(len(p))); err != nil || len(p) == 0 {
		return err
	}
	return b.d.be.read(b.m, off, p)
}

// Typed names count elements of a committed type in a device buffer, with
// displacement 0 of element 0 at byte Base (element k at Base + k*Extent),
// as ddt.Type.PackRange's typed, base and count do.
type Typed struct {
	Type  *ddt.Type
	Buf   *Buffer
	Base  int64
	Count int
}

// PlanOf returns the plan of the committed type t. The plan is kept with
// the type (the first call lowers it, or finds an identical type's plan), so
// later calls cost one load. Errors are NewPlan's.
func PlanOf(t *ddt.Type) (*Plan, error) {
	if t == nil {
		return nil, fmt.Errorf("gpu: PlanOf: nil type: %w", ddt.ErrInvalid)
	}
	ir := ddtir.TypeIR(t)
	if ir == nil {
		return nil, fmt.Errorf("gpu: PlanOf %s: %w", t.Name(), ddt.ErrNotCommitted)
	}
	if v := ir.GPU.Load(); v != nil {
		return (*v).(*Plan), nil
	}
	p, err := planOf(ir)
	if err != nil {
		return nil, err
	}
	var v any = p
	ir.GPU.Store(&v)
	return p, nil
}

// Pack packs the packed-stream bytes [from, from+n) of src, or as many as
// the stream has left, into dst at byte dstOff with a kernel on the device,
// and returns how many it wrote. Like ddt.Type.PackRange it may start and
// stop anywhere in the stream. The launch is synchronous.
//
// Errors: ErrDeclined (wrapping errs.ErrNotSupported) for a type without
// a GPU kernel, ddt.ErrBounds when the type's bytes leave src's buffer,
// errs.ErrOutOfRange when the window leaves dst, ErrClosed, ctx's error,
// or the runtime's.
func (d *Device) Pack(ctx context.Context, dst *Buffer, dstOff int64, src Typed, from, n int64) (int64, error) {
	return d.run(ctx, dst, dstOff, src, from, n, false)
}

// Unpack is the reverse of Pack: it copies up to n bytes of src at byte
// srcOff into the packed-stream bytes starting at from of dst's elements.
// It writes only the bytes of the type's blocks.
func (d *Device) Unpack(ctx context.Context, dst Typed, src *Buffer, srcOff int64, from, n int64) (int64, error) {
	return d.run(ctx, src, srcOff, dst, from, n, true)
}

func (d *Device) run(ctx context.Context, pk *Buffer, poff int64, ty Typed, from, n int64, unpack bool) (int64, error) {
	nb, _, err := d.start(ctx, pk, poff, ty, from, n, unpack, false)
	return nb, err
}

// start checks and starts one pack or unpack: run to completion (ev nil),
// or with async enqueued on a backend that has streams (ev its event).
func (d *Device) start(ctx context.Context, pk *Buffer, poff int64, ty Typed, from, n int64, unpack, async bool) (int64, any, error) {
	if !d.ok() {
		return 0, nil, errNoDevice
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if !pk.ok() || !ty.Buf.ok() {
		return 0, nil, errNoBuffer
	}
	if ty.Type == nil {
		return 0, nil, fmt.Errorf("gpu: nil type: %w", errs.ErrInvalid)
	}
	if pk.d != d || ty.Buf.d != d {
		return 0, nil, fmt.Errorf("gpu: buffer of another device: %w", errs.ErrInvalid)
	}
	p, err := PlanOf(ty.Type)
	if err != nil {
		return 0, nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, nil, ErrClosed
	}
	if n < 0 {
		return 0, nil, fmt.Errorf("gpu: window of %d bytes: %w", n, errs.ErrInvalid)
	}
	if err := pk.span("packed window", poff, 0); err != nil {
		return 0, nil, err
	}
	if err := ty.Buf.span("typed buffer", 0, 0); err != nil {
		return 0, nil, err
	}
	nb, err := p.window(ty.Buf.n, ty.Base, ty.Count, from, min(n, pk.n-poff))
	if err != nil || nb == 0 {
		return 0, nil, err
	}
	if lo, ok := p.contiguous(ty.Base, ty.Count); ok {
		if c, ok := d.be.(copier); ok { // a contiguous run of bytes: one copy
			d.stats.Copies++
			if unpack {
				return nb, nil, c.copies(ty.Buf.m, pk.m, []int64{poff}, []int64{nb}, lo+from)
			}
			return nb, nil, c.copies(pk.m, ty.Buf.m, []int64{lo + from}, []int64{nb}, poff)
		}
	}
	if job := d.chooseDMA(p, ty, from, nb, poff); job != nil { // copies the cost model (or SetMethod) prefers; synchronous
		if job.m == MethodRect {
			d.stats.Rects++
		} else {
			d.stats.BlockDMA++
		}
		return nb, nil, d.runDMA(job, ty.Buf.m, pk.m, unpack)
	}
	return d.launchKernel(p, pk, poff, ty, from, nb, unpack, async)
}

// launchKernel packs or unpacks the checked window [from, from+nb) with
// p's kernel; d.mu is held.
func (d *Device) launchKernel(p *Plan, pk *Buffer, poff int64, ty Typed, from, nb int64, unpack, async bool) (int64, any, error) {
	v := p.word(from, nb, ty.Buf.m.addr+uint64(ty.Base), pk.m.addr+uint64(poff), unpack)
	words := nb / v.w
	q0 := uint64(from / v.w)
	a := launchArgs{typed: ty.Buf.m, toff: ty.Base, packed: pk.m, poff: poff, q0: q0, n: uint64(words)}
	v, a.grid, a.block = d.shape(p, v, q0, uint64(words))
	f, err := d.kernel(p, v)
	if err != nil {
		return 0, nil, err
	}
	if a.tab, err = d.table(p); err != nil {
		return 0, nil, err
	}
	a.unpack, a.nbytes = unpack, nb
	d.stats.Launches++
	if as, ok := d.be.(asyncer); ok && async {
		ev, err := as.launchAsync(f, a)
		if err != nil {
			return 0, nil, err
		}
		d.stats.Async++
		return nb, ev, nil
	}
	if err := d.be.launch(f, a); err != nil {
		return 0, nil, err
	}
	return nb, nil, nil
}

// shape completes variant v (word size, direction, and the 64-bit element
// split where the window needs it) for a launch of words words from
// stream word q0, and returns it with the launch's grid and thread block:
// the 3-D launch where it fits, else the 1-D one (a grid-stride loop);
// the 64-bit split is always 1-D. d.mu is held (forceWide and grid1D are
// the tests' knobs).
func (d *Device) shape(p *Plan, v variant, q0, words uint64) (variant, [3]int, [3]int) {
	v.wide = v.wide || d.forceWide
	if d0, d1, _, zn, ok := p.grid3Fits(v.w, q0, words, d.block); ok && !v.wide && !d.grid1D {
		v.grid3 = true
		bx, by := shape3(d0, d1, d.block)
		return v, [3]int{int((d0 + bx - 1) / bx), int((d1 + by - 1) / by), int(zn)}, [3]int{int(bx), int(by), 1}
	}
	n := min((int64(words)+int64(d.block)-1)/int64(d.block), int64(d.maxGrid))
	return v, [3]int{int(n), 1, 1}, [3]int{d.block, 1, 1}
}

// kernel returns kernel v of plan p, building it on first use: the
// module (or program) of that kernel alone. d.mu is held.
func (d *Device) kernel(p *Plan, v variant) (any, error) {
	if f, ok := d.kerns[kernKey{p, v}]; ok {
		d.stats.CacheHits++
		return f, nil
	}
	fs, err := d.be.build(p.kernelSource(d.be.language(), v), []string{p.kernelName(v)})
	if err != nil {
		return nil, err
	}
	d.stats.Builds++
	d.kerns[kernKey{p, v}] = fs[0]
	return fs[0], nil
}

// table returns the device copy of p's lookaside table.
func (d *Device) table(p *Plan) (mem, error) {
	if m, ok := d.tabs[p]; ok {
		return m, nil
	}
	tab := p.tab
	if len(tab) == 0 {
		tab = []int64{0}
	}
	b := make([]byte, 8*len(tab))
	for i, v := range tab {
		putLE64(b[8*i:], uint64(v))
	}
	m, err := d.be.alloc(int64(len(b)), false)
	if err != nil {
		return mem{}, err
	}
	if err := d.be.write(m, 0, b); err != nil {
		d.be.free(m)
		return mem{}, err
	}
	d.tabs[p] = m
	return m, nil
}

// Prepare builds t's kernels now, so that ordinary packs and unpacks of t
// have nothing left to build (otherwise the first launch that needs a
// kernel builds it): the pack and the unpack kernel for the plan's largest
// word size (MaxWord) and the launch split that a whole-stream launch of
// one element takes (the 3-D launch where it fits, as it does for most
// types with a loop or index level; else the 1-D one), and the device
// copy of its lookaside table. A launch whose window, count or alignment
// calls for another word size or split (a window of more than 65535 rows
// of the 3-D grid, a stream past 2^31 words, buffers or windows aligned to
// less than MaxWord) builds that kernel on first use.
func (d *Device) Prepare(t *ddt.Type) error {
	if !d.ok() {
		return errNoDevice
	}
	p, err := PlanOf(t)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	v, _, _ := d.shape(p, variant{w: p.maxWord}, 0, uint64(p.size/p.maxWord))
	for _, unpack := range []bool{false, true} {
		v.unpack = unpack
		if _, err := d.kernel(p, v); err != nil {
			return err
		}
	}
	_, err = d.table(p)
	return err
}

func putLE64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}
