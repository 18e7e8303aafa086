//go:build cgo

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

// Our own declarations of the OpenCL 1.2 entry points gpu calls: no
// OpenCL headers or libraries are needed to build; libOpenCL.so.1 (the
// ICD loader) is opened at run time.
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_bitfield;
typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;

static struct {
	cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
	cl_int (*GetPlatformInfo)(cl_platform_id, cl_uint, size_t, void *, size_t *);
	cl_int (*GetDeviceIDs)(cl_platform_id, cl_bitfield, cl_uint, cl_device_id *, cl_uint *);
	cl_int (*GetDeviceInfo)(cl_device_id, cl_uint, size_t, void *, size_t *);
	cl_context (*CreateContext)(const intptr_t *, cl_uint, const cl_device_id *, void *, void *, cl_int *);
	cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_bitfield, cl_int *);
	cl_mem (*CreateBuffer)(cl_context, cl_bitfield, size_t, void *, cl_int *);
	cl_int (*ReleaseMemObject)(cl_mem);
	cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, const void *, cl_uint, const void *, void *);
	cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, void *, cl_uint, const void *, void *);
	void *(*EnqueueMapBuffer)(cl_command_queue, cl_mem, cl_uint, cl_bitfield, size_t, size_t, cl_uint, const void *, void *, cl_int *);
	cl_int (*EnqueueUnmapMemObject)(cl_command_queue, cl_mem, void *, cl_uint, const void *, void *);
	cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char **, const size_t *, cl_int *);
	cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id *, const char *, void *, void *);
	cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_uint, size_t, void *, size_t *);
	cl_kernel (*CreateKernel)(cl_program, const char *, cl_int *);
	cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void *);
	cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint, const void *, void *);
	cl_int (*Finish)(cl_command_queue);
	cl_int (*ReleaseKernel)(cl_kernel);
	cl_int (*ReleaseProgram)(cl_program);
	cl_int (*ReleaseCommandQueue)(cl_command_queue);
	cl_int (*ReleaseContext)(cl_context);
	cl_int (*EnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint, const void *, void *);
	cl_int (*EnqueueCopyBufferRect)(cl_command_queue, cl_mem, cl_mem, const size_t *, const size_t *, const size_t *,
		size_t, size_t, size_t, size_t, cl_uint, const void *, void *);
	cl_int (*Flush)(cl_command_queue);
	cl_int (*WaitForEvents)(cl_uint, const cl_event *);
	cl_int (*GetEventInfo)(cl_event, cl_uint, size_t, void *, size_t *);
	cl_int (*ReleaseEvent)(cl_event);
} weft_cl;

static char weft_cl_msg[256];

// weft_cl_load opens name and resolves every entry point; 0 or -1 (the
// reason in weft_cl_msg).
static int weft_cl_load(const char *name) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(weft_cl_msg, sizeof weft_cl_msg, "%s", dlerror());
		return -1;
	}
	struct { const char *n; void **p; } syms[] = {
#define S(x) {"cl" #x, (void **)&weft_cl.x}
		S(GetPlatformIDs), S(GetPlatformInfo), S(GetDeviceIDs), S(GetDeviceInfo), S(CreateContext),
		S(CreateCommandQueue), S(CreateBuffer), S(ReleaseMemObject), S(EnqueueWriteBuffer),
		S(EnqueueReadBuffer), S(EnqueueMapBuffer), S(EnqueueUnmapMemObject), S(CreateProgramWithSource),
		S(BuildProgram), S(GetProgramBuildInfo), S(CreateKernel), S(SetKernelArg), S(EnqueueNDRangeKernel),
		S(Finish), S(ReleaseKernel), S(ReleaseProgram), S(ReleaseCommandQueue), S(ReleaseContext),
		S(EnqueueCopyBuffer), S(EnqueueCopyBufferRect), S(Flush), S(WaitForEvents), S(GetEventInfo),
		S(ReleaseEvent),
#undef S
	};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		*syms[i].p = dlsym(h, syms[i].n);
		if (!*syms[i].p) {
			snprintf(weft_cl_msg, sizeof weft_cl_msg, "%s has no %s", name, syms[i].n);
			return -1;
		}
	}
	return 0;
}

static const char *weft_cl_error(void) { return weft_cl_msg; }

// weft_cl_unified reports CL_DEVICE_HOST_UNIFIED_MEMORY (0x1035): the
// device shares the host's memory (a CPU device, an integrated GPU).
static int weft_cl_unified(cl_device_id dev) {
	cl_uint v = 0; // cl_bool
	if (weft_cl.GetDeviceInfo(dev, 0x1035, sizeof v, &v, NULL) != 0)
		return 0;
	return v != 0;
}

// weft_cl_open opens device number idx over all platforms: context and
// in-order queue. Returns 0 or an OpenCL error (-1001: no platform,
// -1: no such device).
static cl_int weft_cl_open(int idx, cl_device_id *dev, cl_context *ctx, cl_command_queue *q,
		char *name, size_t nlen) {
	cl_platform_id plats[16];
	cl_uint np = 0;
	cl_int e = weft_cl.GetPlatformIDs(16, plats, &np);
	if (e != 0)
		return e;
	for (cl_uint i = 0; i < np; i++) {
		cl_device_id devs[64];
		cl_uint nd = 0;
		if (weft_cl.GetDeviceIDs(plats[i], 0xFFFFFFFF, 64, devs, &nd) != 0)
			continue;
		if (idx >= (int)nd) {
			idx -= nd;
			continue;
		}
		*dev = devs[idx];
		size_t l = 0;
		weft_cl.GetDeviceInfo(*dev, 0x102B, nlen - 1, name, &l); // CL_DEVICE_NAME
		name[l < nlen ? l : nlen - 1] = 0;
		*ctx = weft_cl.CreateContext(NULL, 1, dev, NULL, NULL, &e);
		if (e != 0)
			return e;
		*q = weft_cl.CreateCommandQueue(*ctx, *dev, 0, &e);
		if (e != 0) {
			weft_cl.ReleaseContext(*ctx);
			return e;
		}
		return 0;
	}
	return -1;
}

static cl_mem weft_cl_alloc(cl_context ctx, size_t n, void *host, cl_int *e) {
	return weft_cl.CreateBuffer(ctx, host ? (1 << 3) : 1, n, host, e); // CL_MEM_USE_HOST_PTR : CL_MEM_READ_WRITE
}
static cl_int weft_cl_free(cl_mem m) { return weft_cl.ReleaseMemObject(m); }
static cl_int weft_cl_write(cl_command_queue q, cl_mem m, size_t off, size_t n, const void *p) {
	return weft_cl.EnqueueWriteBuffer(q, m, 1, off, n, p, 0, NULL, NULL);
}
static cl_int weft_cl_read(cl_command_queue q, cl_mem m, size_t off, size_t n, void *p) {
	return weft_cl.EnqueueReadBuffer(q, m, 1, off, n, p, 0, NULL, NULL);
}
// weft_cl_sync makes the device's writes to bytes [off, off+n) of a host
// buffer visible to the host (a blocking map and unmap of that window; no
// copy where memory is shared). Only the window: the rest of the buffer
// may be the host's (a NIC writing another segment).
static cl_int weft_cl_sync(cl_command_queue q, cl_mem m, size_t off, size_t n) {
	cl_int e = 0;
	void *p = weft_cl.EnqueueMapBuffer(q, m, 1, 1, off, n, 0, NULL, NULL, &e); // CL_MAP_READ
	if (e != 0)
		return e;
	e = weft_cl.EnqueueUnmapMemObject(q, m, p, 0, NULL, NULL);
	if (e != 0)
		return e;
	return weft_cl.Finish(q);
}

// weft_cl_build builds src and creates its n kernels; on a build failure
// the log is copied into logbuf.
static cl_int weft_cl_build(cl_context ctx, cl_device_id dev, const char *src, const char **names, int n,
		cl_kernel *out, cl_program *prog, char *logbuf, size_t loglen) {
	cl_int e = 0;
	*prog = weft_cl.CreateProgramWithSource(ctx, 1, &src, NULL, &e);
	if (e != 0)
		return e;
	e = weft_cl.BuildProgram(*prog, 1, &dev, "-cl-std=CL1.2", NULL, NULL);
	if (e != 0) {
		size_t l = 0;
		weft_cl.GetProgramBuildInfo(*prog, dev, 0x1183, loglen - 1, logbuf, &l); // CL_PROGRAM_BUILD_LOG
		logbuf[l < loglen ? l : loglen - 1] = 0;
		weft_cl.ReleaseProgram(*prog);
		return e;
	}
	for (int i = 0; i < n; i++) {
		out[i] = weft_cl.CreateKernel(*prog, names[i], &e);
		if (e != 0)
			return e;
	}
	return 0;
}

// enqueue sets the kernel's arguments (values copied here, in C) and
// enqueues it (with an event in ev when ev is not NULL).
static cl_int enqueue(cl_command_queue q, cl_kernel k, cl_mem typed, int64_t toff, cl_mem packed,
		int64_t poff, cl_mem tab, uint64_t q0, uint64_t n, const size_t *grid, const size_t *block, cl_event *ev) {
	cl_int e = 0;
	e |= weft_cl.SetKernelArg(k, 0, sizeof typed, &typed);
	e |= weft_cl.SetKernelArg(k, 1, sizeof toff, &toff);
	e |= weft_cl.SetKernelArg(k, 2, sizeof packed, &packed);
	e |= weft_cl.SetKernelArg(k, 3, sizeof poff, &poff);
	e |= weft_cl.SetKernelArg(k, 4, sizeof tab, &tab);
	e |= weft_cl.SetKernelArg(k, 5, sizeof q0, &q0);
	e |= weft_cl.SetKernelArg(k, 6, sizeof n, &n);
	if (e != 0)
		return -51; // CL_INVALID_ARG_SIZE family
	size_t global[3];
	for (int i = 0; i < 3; i++)
		global[i] = grid[i] * block[i];
	return weft_cl.EnqueueNDRangeKernel(q, k, 3, NULL, global, block, 0, NULL, ev);
}

// weft_cl_launch runs the kernel to completion.
static cl_int weft_cl_launch(cl_command_queue q, cl_kernel k, cl_mem typed, int64_t toff, cl_mem packed,
		int64_t poff, cl_mem tab, uint64_t q0, uint64_t n, const size_t *grid, const size_t *block) {
	cl_int e = enqueue(q, k, typed, toff, packed, poff, tab, q0, n, grid, block, NULL);
	if (e != 0)
		return e;
	return weft_cl.Finish(q);
}

// An asynchronous launch: the kernel, then (when it writes host memory)
// a non-blocking map of that buffer, whose event is the launch's: once it
// completes the host sees the kernel's writes. Nothing waits here.
typedef struct {
	cl_event ev;
	cl_mem m; // the mapped host buffer, or NULL
	void *p;  // its mapping
} weft_cl_async;

static cl_int weft_cl_launch_async(cl_command_queue q, cl_kernel k, cl_mem typed, int64_t toff, cl_mem packed,
		int64_t poff, cl_mem tab, uint64_t q0, uint64_t n, const size_t *grid, const size_t *block,
		cl_mem host, size_t hostoff, size_t hostlen, weft_cl_async *out) {
	cl_event kev = NULL;
	out->m = NULL;
	out->p = NULL;
	cl_int e = enqueue(q, k, typed, toff, packed, poff, tab, q0, n, grid, block, &kev);
	if (e != 0)
		return e;
	out->ev = kev;
	if (host) {
		cl_event mev = NULL;
		void *p = weft_cl.EnqueueMapBuffer(q, host, 0, 1, hostoff, hostlen, 0, NULL, &mev, &e); // CL_MAP_READ
		if (e != 0) {
			weft_cl.Finish(q);
			weft_cl.ReleaseEvent(kev);
			return e;
		}
		weft_cl.ReleaseEvent(kev);
		out->ev = mev;
		out->m = host;
		out->p = p;
	}
	return weft_cl.Flush(q);
}

// weft_cl_async_query: 1 complete, 0 still queued or running, <0 the
// command's error.
static cl_int weft_cl_async_query(weft_cl_async *a) {
	cl_int st = 0;
	cl_int e = weft_cl.GetEventInfo(a->ev, 0x11D3, sizeof st, &st, NULL); // CL_EVENT_COMMAND_EXECUTION_STATUS
	if (e != 0)
		return e;
	if (st < 0)
		return st;
	return st == 0; // CL_COMPLETE
}
static cl_int weft_cl_async_wait(weft_cl_async *a) { return weft_cl.WaitForEvents(1, &a->ev); }
// weft_cl_async_release unmaps the buffer (after the wait) and frees the event.
static void weft_cl_async_release(cl_command_queue q, weft_cl_async *a) {
	if (a->m)
		weft_cl.EnqueueUnmapMemObject(q, a->m, a->p, 0, NULL, NULL);
	weft_cl.ReleaseEvent(a->ev);
	free(a);
}

// Copies for the benchmark's DMA baselines: one copy per block, and one
// rectangular (2D) copy.
static cl_int weft_cl_copies(cl_command_queue q, cl_mem dst, cl_mem src, int64_t at, const int64_t *offs, const int64_t *lens, int n) {
	size_t d = at;
	for (int i = 0; i < n; i++) {
		cl_int e = weft_cl.EnqueueCopyBuffer(q, src, dst, offs[i], d, lens[i], 0, NULL, NULL);
		if (e != 0)
			return e;
		d += lens[i];
	}
	return weft_cl.Finish(q);
}
// weft_cl_publish hands the host's writes to [off, off+n) of a
// CL_MEM_USE_HOST_PTR buffer to the device before a command reads them: a
// map for writing that invalidates the region (no copy back) and its
// unmap, enqueued (the queue is in order).
static cl_int weft_cl_publish(cl_command_queue q, cl_mem m, size_t off, size_t n) {
	cl_int e = 0;
	void *p = weft_cl.EnqueueMapBuffer(q, m, 0, 1 << 2, off, n, 0, NULL, NULL, &e); // CL_MAP_WRITE_INVALIDATE_REGION
	if (e != 0)
		return e;
	return weft_cl.EnqueueUnmapMemObject(q, m, p, 0, NULL, NULL);
}
// The measured choice's DMA (method.go): a list of copies and one
// rectangular copy, between any two buffers, at any offsets.
static cl_int weft_cl_copylist(cl_command_queue q, cl_mem dst, cl_mem src, const int64_t *doffs, const int64_t *soffs,
		const int64_t *lens, int n) {
	for (int i = 0; i < n; i++) {
		cl_int e = weft_cl.EnqueueCopyBuffer(q, src, dst, soffs[i], doffs[i], lens[i], 0, NULL, NULL);
		if (e != 0)
			return e;
	}
	return weft_cl.Finish(q);
}
static cl_int weft_cl_rect(cl_command_queue q, cl_mem dst, size_t doff, size_t dpitch, cl_mem src, size_t soff,
		size_t spitch, size_t width, size_t height) {
	size_t so[3] = {soff % spitch, soff / spitch, 0}, dO[3] = {doff % dpitch, doff / dpitch, 0}, region[3] = {width, height, 1};
	cl_int e = weft_cl.EnqueueCopyBufferRect(q, src, dst, so, dO, region, spitch, 0, dpitch, 0, 0, NULL, NULL);
	return e ? e : weft_cl.Finish(q);
}
static cl_int weft_cl_copy2d(cl_command_queue q, cl_mem dst, size_t dpitch, cl_mem src, size_t soff, size_t spitch,
		size_t width, size_t height) {
	size_t so[3] = {soff % spitch, soff / spitch, 0}, dz[3] = {0, 0, 0}, region[3] = {width, height, 1};
	cl_int e = weft_cl.EnqueueCopyBufferRect(q, src, dst, so, dz, region, spitch, 0, dpitch, 0, 0, NULL, NULL);
	return e ? e : weft_cl.Finish(q);
}

static void weft_cl_close(cl_context ctx, cl_command_queue q) {
	weft_cl.ReleaseCommandQueue(q);
	weft_cl.ReleaseContext(ctx);
}
static void weft_cl_release(cl_program p, cl_kernel *k, int n) {
	for (int i = 0; i < n; i++)
		if (k[i])
			weft_cl.ReleaseKernel(k[i]);
	weft_cl.ReleaseProgram(p);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/weft-hpc/weft/errs"
)

// clLibName is the OpenCL ICD loader opened at run time (a variable so
// tests can name a missing one).
var clLibName = "libOpenCL.so.1"

var clLib struct {
	once sync.Once
	err  error
}

func clLoad() error {
	clLib.once.Do(func() {
		clLib.err = clOpenLib(clLibName)
	})
	return clLib.err
}

// clOpenLib opens the ICD loader and resolves every entry point.
func clOpenLib(lib string) error {
	name := C.CString(lib)
	defer C.free(unsafe.Pointer(name))
	if C.weft_cl_load(name) != 0 {
		return fmt.Errorf("gpu: cannot load OpenCL (%s): %s: %w", lib, C.GoString(C.weft_cl_error()), errs.ErrNotSupported)
	}
	return nil
}

// clError is an OpenCL status code.
type clError int32

func (e clError) Error() string {
	if s, ok := clErrNames[int32(e)]; ok {
		return fmt.Sprintf("OpenCL error %d (%s)", int32(e), s)
	}
	return fmt.Sprintf("OpenCL error %d", int32(e))
}

var clErrNames = map[int32]string{
	-1: "CL_DEVICE_NOT_FOUND", -4: "CL_MEM_OBJECT_ALLOCATION_FAILURE", -5: "CL_OUT_OF_RESOURCES",
	-6: "CL_OUT_OF_HOST_MEMORY", -11: "CL_BUILD_PROGRAM_FAILURE", -30: "CL_INVALID_VALUE",
	-38: "CL_INVALID_MEM_OBJECT", -46: "CL_INVALID_KERNEL_NAME", -51: "CL_INVALID_ARG_SIZE",
	-54: "CL_INVALID_WORK_GROUP_SIZE", -61: "CL_INVALID_BUFFER_SIZE", -1001: "CL_PLATFORM_NOT_FOUND_KHR",
}

type clBackend struct {
	dev   C.cl_device_id
	ctx   C.cl_context
	q     C.cl_command_queue
	name  string
	progs []clProg
	host  map[C.cl_mem]unsafe.Pointer
	// published counts the windows of host memory handed to the device
	// before a command read them (publish; tests).
	published int64
	unified   bool // CL_DEVICE_HOST_UNIFIED_MEMORY
}

type clProg struct {
	p C.cl_program
	k []C.cl_kernel
}

// OpenOpenCL opens OpenCL device number index, counting the devices of
// every platform the ICD loader lists, in order. Without libOpenCL.so.1,
// a platform or such a device the error wraps errs.ErrNotSupported.
func OpenOpenCL(index int) (*Device, error) {
	if err := clLoad(); err != nil {
		return nil, err
	}
	if index < 0 {
		return nil, fmt.Errorf("gpu: OpenCL device %d: %w", index, errs.ErrInvalid)
	}
	b := &clBackend{host: map[C.cl_mem]unsafe.Pointer{}}
	var name [256]C.char
	if e := C.weft_cl_open(C.int(index), &b.dev, &b.ctx, &b.q, &name[0], C.size_t(len(name))); e != 0 {
		err := error(clError(e))
		if e == -1 || e == -1001 {
			err = fmt.Errorf("%w: %w", err, errs.ErrNotSupported)
		}
		return nil, fmt.Errorf("gpu: OpenCL device %d: %w", index, err)
	}
	b.name = C.GoString(&name[0])
	b.unified = C.weft_cl_unified(b.dev) != 0
	return newDevice(b), nil
}

func (b *clBackend) kind() string     { return "opencl" }
func (b *clBackend) integrated() bool { return b.unified }
func (b *clBackend) describe() string { return b.name }
func (b *clBackend) language() lang   { return langOpenCL }

func (b *clBackend) alloc(n int64, host bool) (mem, error) {
	var hp unsafe.Pointer
	if host {
		if C.posix_memalign(&hp, 4096, C.size_t(n)) != 0 {
			return mem{}, fmt.Errorf("gpu: OpenCL host buffer of %d bytes: %w", n, errs.ErrOutOfRange)
		}
		C.memset(hp, 0, C.size_t(n))
	}
	var e C.cl_int
	m := C.weft_cl_alloc(b.ctx, C.size_t(n), hp, &e)
	if e != 0 {
		C.free(hp)
		return mem{}, fmt.Errorf("gpu: OpenCL buffer of %d bytes: %w", n, clError(e))
	}
	out := mem{h: m}
	if host {
		b.host[m] = hp
		out.host = unsafe.Slice((*byte)(hp), n)
	}
	return out, nil
}

// mapHost wraps p (C or mmap memory) in a CL_MEM_USE_HOST_PTR buffer.
func (b *clBackend) mapHost(p []byte) (mem, error) {
	var e C.cl_int
	m := C.weft_cl_alloc(b.ctx, C.size_t(len(p)), unsafe.Pointer(unsafe.SliceData(p)), &e)
	if e != 0 {
		return mem{}, fmt.Errorf("gpu: OpenCL buffer over %d bytes of host memory: %w", len(p), clError(e))
	}
	return mem{h: m, host: p, borrowed: true}, nil
}

// publish hands the host's writes to bytes [off, off+n) of host buffer m
// to the device before the next command reads them (a map for writing
// and its unmap, enqueued). Nothing for device memory.
func (b *clBackend) publish(m mem, off, n int64) error {
	if m.host == nil || n <= 0 {
		return nil
	}
	if e := C.weft_cl_publish(b.q, m.h.(C.cl_mem), C.size_t(off), C.size_t(n)); e != 0 {
		return fmt.Errorf("gpu: OpenCL map for writing: %w", clError(e))
	}
	b.published++
	return nil
}

// syncHost makes the device's writes to bytes [off, off+n) of host buffer
// m visible to the host. Nothing for device memory.
func (b *clBackend) syncHost(m mem, off, n int64) error {
	if m.host == nil || n <= 0 {
		return nil
	}
	if e := C.weft_cl_sync(b.q, m.h.(C.cl_mem), C.size_t(off), C.size_t(n)); e != 0 {
		return fmt.Errorf("gpu: OpenCL map: %w", clError(e))
	}
	return nil
}

// readWindow and writeWindow are the parts of the buffers a launch reads
// and writes: the packed window and the whole typed buffer (whose bytes
// of the window the kernel does not know in one span).
func (a launchArgs) readWindow() (mem, int64, int64) {
	if a.unpack {
		return a.packed, a.poff, a.nbytes
	}
	return a.typed, 0, int64(len(a.typed.host))
}

func (a launchArgs) writeWindow() (mem, int64, int64) {
	if a.unpack {
		return a.typed, 0, int64(len(a.typed.host))
	}
	return a.packed, a.poff, a.nbytes
}

// spanOf is the smallest window holding the blocks (offs[i], lens[i]).
func spanOf(offs, lens []int64) (off, n int64) {
	lo, hi := offs[0], offs[0]
	for i, o := range offs {
		lo, hi = min(lo, o), max(hi, o+lens[i])
	}
	return lo, hi - lo
}

func (b *clBackend) free(m mem) error {
	cm := m.h.(C.cl_mem)
	e := C.weft_cl_free(cm)
	if hp, ok := b.host[cm]; ok && !m.borrowed {
		C.free(hp)
		delete(b.host, cm)
	}
	if e != 0 {
		return fmt.Errorf("gpu: clReleaseMemObject: %w", clError(e))
	}
	return nil
}

func (b *clBackend) write(m mem, off int64, p []byte) error {
	if e := C.weft_cl_write(b.q, m.h.(C.cl_mem), C.size_t(off), C.size_t(len(p)), unsafe.Pointer(&p[0])); e != 0 {
		return fmt.Errorf("gpu: clEnqueueWriteBuffer: %w", clError(e))
	}
	return nil
}

func (b *clBackend) read(m mem, off int64, p []byte) error {
	if e := C.weft_cl_read(b.q, m.h.(C.cl_mem), C.size_t(off), C.size_t(len(p)), unsafe.Pointer(&p[0])); e != 0 {
		return fmt.Errorf("gpu: clEnqueueReadBuffer: %w", clError(e))
	}
	return nil
}

func (b *clBackend) build(src string, names []string) ([]any, error) {
	c := newCBuild(src, names)
	defer c.free()
	ks := (*[1 << 10]C.cl_kernel)(c.out)
	var prog C.cl_program
	if e := C.weft_cl_build(b.ctx, b.dev, c.src, c.names, C.int(len(names)), &ks[0], &prog, c.log, cLogLen); e != 0 {
		if e == -11 {
			return nil, fmt.Errorf("gpu: OpenCL build: %w:\n%s", clError(e), C.GoString(c.log))
		}
		return nil, fmt.Errorf("gpu: OpenCL build: %w", clError(e))
	}
	pr := clProg{p: prog}
	out := make([]any, len(names))
	for i := range names {
		pr.k = append(pr.k, ks[i])
		out[i] = ks[i]
	}
	b.progs = append(b.progs, pr)
	return out, nil
}

func (b *clBackend) launch(f any, a launchArgs) error {
	if err := b.publish(a.readWindow()); err != nil {
		return err
	}
	var grid, block [3]C.size_t
	for i := range 3 {
		grid[i], block[i] = C.size_t(a.grid[i]), C.size_t(a.block[i])
	}
	if e := C.weft_cl_launch(b.q, f.(C.cl_kernel), a.typed.h.(C.cl_mem), C.int64_t(a.toff), a.packed.h.(C.cl_mem),
		C.int64_t(a.poff), a.tab.h.(C.cl_mem), C.uint64_t(a.q0), C.uint64_t(a.n), &grid[0], &block[0]); e != 0 {
		return fmt.Errorf("gpu: OpenCL launch: %w", clError(e))
	}
	return b.syncHost(a.writeWindow())
}

// launchAsync enqueues the kernel (and the map that makes its writes to
// host memory visible) and returns the event of the last of them.
func (b *clBackend) launchAsync(f any, a launchArgs) (any, error) {
	if err := b.publish(a.readWindow()); err != nil {
		return nil, err
	}
	var grid, block [3]C.size_t
	for i := range 3 {
		grid[i], block[i] = C.size_t(a.grid[i]), C.size_t(a.block[i])
	}
	// Map only the window the kernel wrote: later kernels may write the
	// rest of the buffer while this mapping is held (the pipeline's ring).
	var host C.cl_mem
	var hostOff, hostLen C.size_t
	if w := a.written(); w.host != nil {
		host, hostLen = w.h.(C.cl_mem), C.size_t(len(w.host))
		if !a.unpack {
			hostOff, hostLen = C.size_t(a.poff), C.size_t(a.nbytes)
		}
	}
	ev := (*C.weft_cl_async)(C.calloc(1, C.size_t(unsafe.Sizeof(C.weft_cl_async{}))))
	if e := C.weft_cl_launch_async(b.q, f.(C.cl_kernel), a.typed.h.(C.cl_mem), C.int64_t(a.toff), a.packed.h.(C.cl_mem),
		C.int64_t(a.poff), a.tab.h.(C.cl_mem), C.uint64_t(a.q0), C.uint64_t(a.n), &grid[0], &block[0], host, hostOff, hostLen, ev); e != 0 {
		C.free(unsafe.Pointer(ev))
		return nil, fmt.Errorf("gpu: OpenCL launch: %w", clError(e))
	}
	return ev, nil
}

func (b *clBackend) query(ev any) (bool, error) {
	switch e := C.weft_cl_async_query(ev.(*C.weft_cl_async)); {
	case e < 0:
		return true, fmt.Errorf("gpu: OpenCL kernel: %w", clError(e))
	default:
		return e == 1, nil
	}
}

func (b *clBackend) wait(ev any) error {
	if e := C.weft_cl_async_wait(ev.(*C.weft_cl_async)); e != 0 {
		return fmt.Errorf("gpu: clWaitForEvents: %w", clError(e))
	}
	return nil
}

func (b *clBackend) release(ev any) { C.weft_cl_async_release(b.q, ev.(*C.weft_cl_async)) }

func (b *clBackend) close() error {
	for _, p := range b.progs {
		C.weft_cl_release(p.p, &p.k[0], C.int(len(p.k)))
	}
	b.progs = nil
	C.weft_cl_close(b.ctx, b.q)
	return nil
}

func (b *clBackend) copy2D(dst mem, dpitch int64, src mem, soff, spitch, width, height int64) error {
	if e := C.weft_cl_copy2d(b.q, dst.h.(C.cl_mem), C.size_t(dpitch), src.h.(C.cl_mem), C.size_t(soff), C.size_t(spitch),
		C.size_t(width), C.size_t(height)); e != 0 {
		return fmt.Errorf("gpu: clEnqueueCopyBufferRect: %w", clError(e))
	}
	return nil
}

func (b *clBackend) copies(dst, src mem, offs, lens []int64, at int64) error {
	if len(offs) == 0 {
		return nil
	}
	so, sn := spanOf(offs, lens)
	if err := b.publish(src, so, sn); err != nil {
		return err
	}
	var total int64
	for _, l := range lens {
		total += l
	}
	o := cInt64s(offs, lens)
	defer C.free(unsafe.Pointer(o))
	if e := C.weft_cl_copies(b.q, dst.h.(C.cl_mem), src.h.(C.cl_mem), C.int64_t(at), o, (*C.int64_t)(unsafe.Add(unsafe.Pointer(o), 8*len(offs))), C.int(len(offs))); e != 0 {
		return fmt.Errorf("gpu: clEnqueueCopyBuffer: %w", clError(e))
	}
	return b.syncHost(dst, at, total)
}

// rect is one 2-D copy: height rows of width bytes, src rows spitch apart
// from byte soff, dst rows dpitch apart from byte doff
// (clEnqueueCopyBufferRect).
func (b *clBackend) rect(dst mem, doff, dpitch int64, src mem, soff, spitch, width, height int64) error {
	if err := b.publish(src, soff, (height-1)*spitch+width); err != nil {
		return err
	}
	if e := C.weft_cl_rect(b.q, dst.h.(C.cl_mem), C.size_t(doff), C.size_t(dpitch), src.h.(C.cl_mem), C.size_t(soff),
		C.size_t(spitch), C.size_t(width), C.size_t(height)); e != 0 {
		return fmt.Errorf("gpu: clEnqueueCopyBufferRect: %w", clError(e))
	}
	return b.syncHost(dst, doff, (height-1)*dpitch+width)
}

// copyList copies lens[i] bytes from src at soffs[i] to dst at doffs[i]
// (clEnqueueCopyBuffer each).
func (b *clBackend) copyList(dst, src mem, doffs, soffs, lens []int64) error {
	if len(lens) == 0 {
		return nil
	}
	so, sn := spanOf(soffs, lens)
	if err := b.publish(src, so, sn); err != nil {
		return err
	}
	o := cInt64s3(doffs, soffs, lens)
	defer C.free(unsafe.Pointer(o))
	n := len(lens)
	if e := C.weft_cl_copylist(b.q, dst.h.(C.cl_mem), src.h.(C.cl_mem), o, (*C.int64_t)(unsafe.Add(unsafe.Pointer(o), 8*n)),
		(*C.int64_t)(unsafe.Add(unsafe.Pointer(o), 16*n)), C.int(n)); e != 0 {
		return fmt.Errorf("gpu: clEnqueueCopyBuffer: %w", clError(e))
	}
	do, dn := spanOf(doffs, lens)
	return b.syncHost(dst, do, dn)
}

// cInt64s3 returns C memory holding a, b and c back to back (the caller
// frees it).
func cInt64s3(a, b, c []int64) *C.int64_t {
	p := (*C.int64_t)(C.malloc(C.size_t(8 * (len(a) + len(b) + len(c)))))
	s := unsafe.Slice((*int64)(unsafe.Pointer(p)), len(a)+len(b)+len(c))
	copy(s, a)
	copy(s[len(a):], b)
	copy(s[len(a)+len(b):], c)
	return p
}

// cInt64s returns C memory holding a followed by b (the caller frees it).
func cInt64s(a, b []int64) *C.int64_t {
	p := (*C.int64_t)(C.malloc(C.size_t(8 * (len(a) + len(b)))))
	s := unsafe.Slice((*int64)(unsafe.Pointer(p)), len(a)+len(b))
	copy(s, a)
	copy(s[len(a):], b)
	return p
}
