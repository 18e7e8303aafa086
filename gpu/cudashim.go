//go:build cgo

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Our own declarations of the CUDA driver API entry points gpu calls: no
// CUDA headers or libraries are needed to build; libcuda.so.1 is opened at
// run time. cuda.h #defines the plain names of several functions to their
// _v2 versions; dlsym sees the exported names, so the _v2 ones are asked
// for explicitly (the plain ones are the legacy 32-bit ABI).
typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

typedef struct {
	size_t srcXInBytes, srcY;
	int srcMemoryType;
	const void *srcHost;
	CUdeviceptr srcDevice;
	void *srcArray;
	size_t srcPitch;
	size_t dstXInBytes, dstY;
	int dstMemoryType;
	void *dstHost;
	CUdeviceptr dstDevice;
	void *dstArray;
	size_t dstPitch;
	size_t WidthInBytes, Height;
} weft_memcpy2d; // CUDA_MEMCPY2D_v2

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DriverGetVersion)(int *);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*DevicePrimaryCtxRelease)(CUdevice);
	CUresult (*CtxPushCurrent)(CUcontext);
	CUresult (*CtxPopCurrent)(CUcontext *);
	CUresult (*CtxSynchronize)(void);
	CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *, void **);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*ModuleUnload)(CUmodule);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult (*Memcpy2D)(const weft_memcpy2d *);
	CUresult (*MemHostAlloc)(void **, size_t, unsigned);
	CUresult (*MemFreeHost)(void *);
	CUresult (*MemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
	CUresult (*GetErrorName)(CUresult, const char **);
	CUresult (*GetErrorString)(CUresult, const char **);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*EventCreate)(CUevent *, unsigned);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventQuery)(CUevent);
	CUresult (*EventSynchronize)(CUevent);
	CUresult (*EventDestroy)(CUevent);
	CUresult (*MemHostRegister)(void *, size_t, unsigned);
	CUresult (*MemHostUnregister)(void *);
} weft_cu;

static char weft_cu_msg[256];
static const char *weft_cu_dlerror(void) { return weft_cu_msg; }

static int weft_cu_load(const char *name) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(weft_cu_msg, sizeof weft_cu_msg, "%s", dlerror());
		return -1;
	}
	struct { const char *n; void **p; } syms[] = {
#define S(f, sym) {sym, (void **)&weft_cu.f}
		S(Init, "cuInit"), S(DriverGetVersion, "cuDriverGetVersion"), S(DeviceGetCount, "cuDeviceGetCount"),
		S(DeviceGet, "cuDeviceGet"), S(DeviceGetName, "cuDeviceGetName"), S(DeviceGetAttribute, "cuDeviceGetAttribute"),
		S(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"), S(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
		S(CtxPushCurrent, "cuCtxPushCurrent_v2"), S(CtxPopCurrent, "cuCtxPopCurrent_v2"), S(CtxSynchronize, "cuCtxSynchronize"),
		S(ModuleLoadDataEx, "cuModuleLoadDataEx"), S(ModuleGetFunction, "cuModuleGetFunction"), S(ModuleUnload, "cuModuleUnload"),
		S(LaunchKernel, "cuLaunchKernel"), S(MemAlloc, "cuMemAlloc_v2"), S(MemFree, "cuMemFree_v2"),
		S(MemcpyHtoD, "cuMemcpyHtoD_v2"), S(MemcpyDtoH, "cuMemcpyDtoH_v2"), S(MemcpyDtoD, "cuMemcpyDtoD_v2"),
		S(Memcpy2D, "cuMemcpy2D_v2"), S(MemHostAlloc, "cuMemHostAlloc"), S(MemFreeHost, "cuMemFreeHost"),
		S(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"), S(GetErrorName, "cuGetErrorName"),
		S(GetErrorString, "cuGetErrorString"),
		S(StreamCreate, "cuStreamCreate"), S(StreamDestroy, "cuStreamDestroy_v2"),
		S(StreamSynchronize, "cuStreamSynchronize"), S(EventCreate, "cuEventCreate"),
		S(EventRecord, "cuEventRecord"), S(EventQuery, "cuEventQuery"),
		S(EventSynchronize, "cuEventSynchronize"), S(EventDestroy, "cuEventDestroy_v2"),
		S(MemHostRegister, "cuMemHostRegister_v2"), S(MemHostUnregister, "cuMemHostUnregister"),
#undef S
	};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		*syms[i].p = dlsym(h, syms[i].n);
		if (!*syms[i].p) {
			snprintf(weft_cu_msg, sizeof weft_cu_msg, "%s has no %s", name, syms[i].n);
			return -1;
		}
	}
	return 0;
}

static CUresult weft_cu_init(int *version) {
	CUresult r = weft_cu.DriverGetVersion(version);
	if (r != 0)
		return r;
	return weft_cu.Init(0);
}

static void weft_cu_errname(CUresult r, const char **name, const char **str) {
	*name = *str = NULL;
	weft_cu.GetErrorName(r, name);
	weft_cu.GetErrorString(r, str);
}

// weft_cu_open retains device ord's primary context.
static CUresult weft_cu_open(int ord, CUdevice *dev, CUcontext *ctx, char *name, int nlen) {
	int n = 0;
	CUresult r = weft_cu.DeviceGetCount(&n);
	if (r != 0)
		return r;
	if (ord >= n)
		return 101; // CUDA_ERROR_INVALID_DEVICE
	if ((r = weft_cu.DeviceGet(dev, ord)) != 0)
		return r;
	if ((r = weft_cu.DeviceGetName(name, nlen, *dev)) != 0)
		return r;
	return weft_cu.DevicePrimaryCtxRetain(ctx, *dev);
}

static void weft_cu_close(CUdevice dev) { weft_cu.DevicePrimaryCtxRelease(dev); }

// weft_cu_integrated reports CU_DEVICE_ATTRIBUTE_INTEGRATED (18): the GPU
// shares the host's memory.
static int weft_cu_integrated(CUdevice dev) {
	int v = 0;
	if (weft_cu.DeviceGetAttribute(&v, 18, dev) != 0)
		return 0;
	return v;
}

// Every call below makes the context current on the calling OS thread,
// works, and pops it again (contexts are per thread; a Go goroutine may
// move between threads between two calls, never inside one).
#define WITH(ctx, body) do { \
	CUresult _r = weft_cu.CtxPushCurrent(ctx); \
	if (_r != 0) return _r; \
	_r = (body); \
	CUcontext _old; \
	weft_cu.CtxPopCurrent(&_old); \
	return _r; \
} while (0)

static CUresult weft_cu_alloc(CUcontext ctx, size_t n, CUdeviceptr *p) { WITH(ctx, weft_cu.MemAlloc(p, n)); }
static CUresult weft_cu_free(CUcontext ctx, CUdeviceptr p) { WITH(ctx, weft_cu.MemFree(p)); }

static CUresult hostalloc(size_t n, void **h, CUdeviceptr *p) {
	CUresult r = weft_cu.MemHostAlloc(h, n, 0x01 | 0x02); // PORTABLE | DEVICEMAP
	if (r != 0)
		return r;
	memset(*h, 0, n);
	return weft_cu.MemHostGetDevicePointer(p, *h, 0);
}
static CUresult weft_cu_hostalloc(CUcontext ctx, size_t n, void **h, CUdeviceptr *p) { WITH(ctx, hostalloc(n, h, p)); }
static CUresult weft_cu_freehost(CUcontext ctx, void *h) { WITH(ctx, weft_cu.MemFreeHost(h)); }
// Mapping host memory someone else allocated (MapHost).
static CUresult hostregister(void *h, size_t n, CUdeviceptr *p) {
	CUresult r = weft_cu.MemHostRegister(h, n, 0x01 | 0x02); // PORTABLE | DEVICEMAP
	if (r != 0)
		return r;
	r = weft_cu.MemHostGetDevicePointer(p, h, 0);
	if (r != 0)
		weft_cu.MemHostUnregister(h);
	return r;
}
static CUresult weft_cu_hostregister(CUcontext ctx, void *h, size_t n, CUdeviceptr *p) { WITH(ctx, hostregister(h, n, p)); }
static CUresult weft_cu_hostunregister(CUcontext ctx, void *h) { WITH(ctx, weft_cu.MemHostUnregister(h)); }
static CUresult weft_cu_htod(CUcontext ctx, CUdeviceptr d, const void *h, size_t n) { WITH(ctx, weft_cu.MemcpyHtoD(d, h, n)); }
static CUresult weft_cu_dtoh(CUcontext ctx, void *h, CUdeviceptr d, size_t n) { WITH(ctx, weft_cu.MemcpyDtoH(h, d, n)); }

// optlevel ≥ 0 passes CU_JIT_OPTIMIZATION_LEVEL (0-4); < 0 leaves the
// driver's default (4).
static CUresult load(const char *ptx, CUmodule *mod, const char **names, int n, CUfunction *out, char *log, size_t loglen,
		int optlevel) {
	int opts[3] = {5, 6, 7}; // CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL
	void *vals[3] = {log, (void *)(uintptr_t)loglen, (void *)(uintptr_t)(unsigned)optlevel};
	log[0] = 0;
	CUresult r = weft_cu.ModuleLoadDataEx(mod, ptx, optlevel >= 0 ? 3 : 2, opts, vals);
	if (r != 0)
		return r;
	for (int i = 0; i < n; i++)
		if ((r = weft_cu.ModuleGetFunction(&out[i], *mod, names[i])) != 0)
			return r;
	return 0;
}
static CUresult weft_cu_load_module(CUcontext ctx, const char *ptx, CUmodule *mod, const char **names, int n,
		CUfunction *out, char *log, size_t loglen, int optlevel) {
	WITH(ctx, load(ptx, mod, names, n, out, log, loglen, optlevel));
}
static CUresult weft_cu_unload(CUcontext ctx, CUmodule m) { WITH(ctx, weft_cu.ModuleUnload(m)); }

// launch: the kernel's parameters live here, in C memory, for the call.
static CUresult launch(CUfunction f, uint64_t typed, uint64_t packed, uint64_t tab, uint64_t q0, uint64_t n,
		const unsigned *grid, const unsigned *block) {
	void *params[5] = {&typed, &packed, &tab, &q0, &n};
	CUresult r = weft_cu.LaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, NULL, params, NULL);
	if (r != 0)
		return r;
	return weft_cu.CtxSynchronize();
}
static CUresult weft_cu_launch(CUcontext ctx, CUfunction f, uint64_t typed, uint64_t packed, uint64_t tab,
		uint64_t q0, uint64_t n, const unsigned *grid, const unsigned *block) {
	WITH(ctx, launch(f, typed, packed, tab, q0, n, grid, block));
}

// Stream-asynchronous launches: the kernel goes on the device's stream
// (a blocking stream, so it orders with the synchronous calls above), and
// an event recorded after it says when it is done; nothing waits here.
static CUresult weft_cu_stream(CUcontext ctx, CUstream *s) { WITH(ctx, weft_cu.StreamCreate(s, 0)); }
static CUresult weft_cu_stream_destroy(CUcontext ctx, CUstream s) { WITH(ctx, weft_cu.StreamDestroy(s)); }
static CUresult launch_async(CUfunction f, CUstream s, uint64_t typed, uint64_t packed, uint64_t tab, uint64_t q0,
		uint64_t n, const unsigned *grid, const unsigned *block, CUevent *ev) {
	void *params[5] = {&typed, &packed, &tab, &q0, &n};
	CUresult r = weft_cu.EventCreate(ev, 0x2); // CU_EVENT_DISABLE_TIMING
	if (r != 0)
		return r;
	r = weft_cu.LaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, s, params, NULL);
	if (r == 0)
		r = weft_cu.EventRecord(*ev, s);
	if (r != 0) {
		weft_cu.EventDestroy(*ev);
		*ev = NULL;
	}
	return r;
}
static CUresult weft_cu_launch_async(CUcontext ctx, CUfunction f, CUstream s, uint64_t typed, uint64_t packed,
		uint64_t tab, uint64_t q0, uint64_t n, const unsigned *grid, const unsigned *block, CUevent *ev) {
	WITH(ctx, launch_async(f, s, typed, packed, tab, q0, n, grid, block, ev));
}
// weft_cu_event_query: 0 done, 600 (CUDA_ERROR_NOT_READY) still running.
static CUresult weft_cu_event_query(CUcontext ctx, CUevent e) { WITH(ctx, weft_cu.EventQuery(e)); }
static CUresult weft_cu_event_wait(CUcontext ctx, CUevent e) { WITH(ctx, weft_cu.EventSynchronize(e)); }
static CUresult weft_cu_event_destroy(CUcontext ctx, CUevent e) { WITH(ctx, weft_cu.EventDestroy(e)); }

// 2-D copies: the benchmark's DMA baseline between device buffers
// (memory type 2, CU_MEMORYTYPE_DEVICE) and the measured choice's DMA
// (method.go) between unified addresses (4, CU_MEMORYTYPE_UNIFIED:
// device memory or mapped host memory).
static CUresult copy2d(unsigned int mtype, CUdeviceptr dst, size_t dpitch, CUdeviceptr src, size_t spitch, size_t width, size_t height) {
	weft_memcpy2d c;
	memset(&c, 0, sizeof c);
	c.srcMemoryType = c.dstMemoryType = mtype;
	c.srcDevice = src;
	c.srcPitch = spitch;
	c.dstDevice = dst;
	c.dstPitch = dpitch;
	c.WidthInBytes = width;
	c.Height = height;
	CUresult r = weft_cu.Memcpy2D(&c);
	return r ? r : weft_cu.CtxSynchronize();
}
static CUresult weft_cu_copy2d(CUcontext ctx, CUdeviceptr dst, size_t dpitch, CUdeviceptr src, size_t spitch,
		size_t width, size_t height) {
	WITH(ctx, copy2d(2, dst, dpitch, src, spitch, width, height));
}
// The list of copies below is the measured choice's other DMA.
static CUresult weft_cu_rect(CUcontext ctx, CUdeviceptr dst, size_t dpitch, CUdeviceptr src, size_t spitch,
		size_t width, size_t height) {
	WITH(ctx, copy2d(4, dst, dpitch, src, spitch, width, height));
}
static CUresult copylist(CUdeviceptr dst, CUdeviceptr src, const int64_t *doffs, const int64_t *soffs, const int64_t *lens, int n) {
	for (int i = 0; i < n; i++) {
		CUresult r = weft_cu.MemcpyDtoD(dst + doffs[i], src + soffs[i], lens[i]);
		if (r != 0)
			return r;
	}
	return weft_cu.CtxSynchronize();
}
static CUresult weft_cu_copylist(CUcontext ctx, CUdeviceptr dst, CUdeviceptr src, const int64_t *doffs,
		const int64_t *soffs, const int64_t *lens, int n) {
	WITH(ctx, copylist(dst, src, doffs, soffs, lens, n));
}
static CUresult copies(CUdeviceptr dst, CUdeviceptr src, const int64_t *offs, const int64_t *lens, int n) {
	CUdeviceptr d = dst; // dst already holds the start offset
	for (int i = 0; i < n; i++) {
		CUresult r = weft_cu.MemcpyDtoD(d, src + offs[i], lens[i]);
		if (r != 0)
			return r;
		d += lens[i];
	}
	return weft_cu.CtxSynchronize();
}
static CUresult weft_cu_copies(CUcontext ctx, CUdeviceptr dst, CUdeviceptr src, const int64_t *offs,
		const int64_t *lens, int n) {
	WITH(ctx, copies(dst, src, offs, lens, n));
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/weft-hpc/weft/errs"
)

// cudaLibName is the CUDA driver library opened at run time (a variable
// so tests can name a missing one).
var cudaLibName = "libcuda.so.1"

var cudaLib struct {
	once    sync.Once
	err     error
	version int
}

// cudaResult is a CUresult other than CUDA_SUCCESS.
type cudaResult int

func (r cudaResult) Error() string {
	var name, str *C.char
	C.weft_cu_errname(C.CUresult(r), &name, &str)
	if name == nil {
		return fmt.Sprintf("CUDA error %d", int(r))
	}
	return fmt.Sprintf("CUDA error %d %s: %s", int(r), C.GoString(name), C.GoString(str))
}

// cBuild holds, for one module build, C copies of the source and the
// kernel names, a zeroed array for the kernel handles (pointer-sized in both
// runtimes) and a buffer for the compiler's log.
type cBuild struct {
	src   *C.char
	names **C.char
	out   unsafe.Pointer
	log   *C.char
	strs  []*C.char
}

const cLogLen = 8192

func newCBuild(src string, names []string) *cBuild {
	c := &cBuild{src: C.CString(src), log: (*C.char)(C.calloc(cLogLen, 1))}
	ptr := C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))
	arr := (*[1 << 10]*C.char)(C.calloc(C.size_t(len(names)), ptr))
	for i, n := range names {
		arr[i] = C.CString(n)
		c.strs = append(c.strs, arr[i])
	}
	c.names = &arr[0]
	c.out = C.calloc(C.size_t(len(names)), ptr)
	return c
}

func (c *cBuild) free() {
	for _, s := range c.strs {
		C.free(unsafe.Pointer(s))
	}
	C.free(unsafe.Pointer(c.names))
	C.free(c.out)
	C.free(unsafe.Pointer(c.src))
	C.free(unsafe.Pointer(c.log))
}

// noDevice reports whether r means that this machine has no usable GPU:
// CUDA_ERROR_NO_DEVICE (100), CUDA_ERROR_INVALID_DEVICE (101),
// CUDA_ERROR_INSUFFICIENT_DRIVER (35), CUDA_ERROR_STUB_LIBRARY (34),
// CUDA_ERROR_NOT_INITIALIZED (3), CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803),
// CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804).
func noDevice(r C.CUresult) bool {
	switch r {
	case 100, 101, 35, 34, 3, 803, 804:
		return true
	}
	return false
}

// cudaInit loads libcuda.so.1 and calls cuInit once per process. The
// error wraps errs.ErrNotSupported when the library is missing or no
// device can be used (ErrNoDevice).
func cudaInit() error {
	cudaLib.once.Do(func() {
		if cudaLib.err = cudaOpenLib(cudaLibName); cudaLib.err != nil {
			return
		}
		var v C.int
		if r := C.weft_cu_init(&v); r != 0 {
			cudaLib.version = int(v)
			err := error(cudaResult(r))
			if noDevice(r) {
				err = fmt.Errorf("%w: %w", ErrNoDevice, err)
			}
			cudaLib.err = fmt.Errorf("gpu: cuInit: %w", err)
			return
		}
		cudaLib.version = int(v)
	})
	return cudaLib.err
}

// cudaOpenLib opens the driver library and resolves every entry point.
func cudaOpenLib(lib string) error {
	name := C.CString(lib)
	defer C.free(unsafe.Pointer(name))
	if C.weft_cu_load(name) != 0 {
		return fmt.Errorf("gpu: cannot load the CUDA driver (%s): %s: %w", lib, C.GoString(C.weft_cu_dlerror()), errs.ErrNotSupported)
	}
	return nil
}

// ErrNoDevice is wrapped by OpenCUDA's error when the CUDA driver library
// loads but finds no usable GPU (CUDA_ERROR_NO_DEVICE and kin). It wraps
// errs.ErrNotSupported.
var ErrNoDevice = fmt.Errorf("gpu: no CUDA device: %w", errs.ErrNotSupported)

type cudaBackend struct {
	dev    C.CUdevice
	ctx    C.CUcontext
	stream C.CUstream // for asynchronous launches, created on first use
	name   string
	mods   []C.CUmodule
	// jitOptLevel is the PTX JIT's CU_JIT_OPTIMIZATION_LEVEL (0-4) for
	// later builds; -1 leaves the driver's default (4). Only
	// BenchmarkBuild changes it (setJITOptLevel), to measure.
	jitOptLevel int
	integ       bool // CU_DEVICE_ATTRIBUTE_INTEGRATED
}

// setJITOptLevel sets the PTX JIT's optimisation level for later builds
// (-1: the driver's default).
func (b *cudaBackend) setJITOptLevel(level int) { b.jitOptLevel = level }

// OpenCUDA opens CUDA device ordinal through the driver API (libcuda.so.1,
// loaded at run time) and its primary context. Kernels are loaded as PTX,
// which the driver compiles for the GPU it finds. Without the library the
// error wraps errs.ErrNotSupported; without a device it wraps ErrNoDevice
// (and so errs.ErrNotSupported).
func OpenCUDA(ordinal int) (*Device, error) {
	if err := cudaInit(); err != nil {
		return nil, err
	}
	if ordinal < 0 {
		return nil, fmt.Errorf("gpu: CUDA device %d: %w", ordinal, errs.ErrInvalid)
	}
	b := &cudaBackend{jitOptLevel: -1}
	var name [256]C.char
	if r := C.weft_cu_open(C.int(ordinal), &b.dev, &b.ctx, &name[0], C.int(len(name))); r != 0 {
		err := error(cudaResult(r))
		if noDevice(r) {
			err = fmt.Errorf("%w: %w", ErrNoDevice, err)
		}
		return nil, fmt.Errorf("gpu: CUDA device %d: %w", ordinal, err)
	}
	b.name = C.GoString(&name[0])
	b.integ = C.weft_cu_integrated(b.dev) != 0
	d := newDevice(b)
	d.ordinal = ordinal
	return d, nil
}

// CUDADriverVersion loads the CUDA driver library and returns its API
// version (e.g. 12020 for 12.2); it works without a device. The error is
// the load's (wrapping errs.ErrNotSupported).
func CUDADriverVersion() (int, error) {
	err := cudaInit()
	if cudaLib.version != 0 {
		return cudaLib.version, nil
	}
	return 0, err
}

func cuErr(op string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("gpu: %s: %w", op, cudaResult(r))
}

func (b *cudaBackend) kind() string { return "cuda" }

func (b *cudaBackend) integrated() bool { return b.integ }
func (b *cudaBackend) describe() string {
	return fmt.Sprintf("%s (driver API %d)", b.name, cudaLib.version)
}
func (b *cudaBackend) language() lang { return langPTX }

func (b *cudaBackend) alloc(n int64, host bool) (mem, error) {
	var p C.CUdeviceptr
	if host {
		var h unsafe.Pointer
		if err := cuErr("cuMemHostAlloc", C.weft_cu_hostalloc(b.ctx, C.size_t(n), &h, &p)); err != nil {
			return mem{}, err
		}
		return mem{h: h, addr: uint64(p), host: unsafe.Slice((*byte)(h), n)}, nil
	}
	if err := cuErr("cuMemAlloc", C.weft_cu_alloc(b.ctx, C.size_t(n), &p)); err != nil {
		return mem{}, err
	}
	return mem{addr: uint64(p)}, nil
}

// mapHost registers p with the driver and maps it into the device.
func (b *cudaBackend) mapHost(p []byte) (mem, error) {
	var d C.CUdeviceptr
	h := unsafe.Pointer(unsafe.SliceData(p))
	if err := cuErr("cuMemHostRegister", C.weft_cu_hostregister(b.ctx, h, C.size_t(len(p)), &d)); err != nil {
		return mem{}, err
	}
	return mem{h: h, addr: uint64(d), host: p, borrowed: true}, nil
}

func (b *cudaBackend) free(m mem) error {
	if m.borrowed {
		return cuErr("cuMemHostUnregister", C.weft_cu_hostunregister(b.ctx, m.h.(unsafe.Pointer)))
	}
	if m.host != nil {
		return cuErr("cuMemFreeHost", C.weft_cu_freehost(b.ctx, m.h.(unsafe.Pointer)))
	}
	return cuErr("cuMemFree", C.weft_cu_free(b.ctx, C.CUdeviceptr(m.addr)))
}

func (b *cudaBackend) write(m mem, off int64, p []byte) error {
	if m.host != nil {
		copy(m.host[off:], p)
		return nil
	}
	return cuErr("cuMemcpyHtoD", C.weft_cu_htod(b.ctx, C.CUdeviceptr(m.addr+uint64(off)), unsafe.Pointer(&p[0]), C.size_t(len(p))))
}

func (b *cudaBackend) read(m mem, off int64, p []byte) error {
	if m.host != nil {
		copy(p, m.host[off:])
		return nil
	}
	return cuErr("cuMemcpyDtoH", C.weft_cu_dtoh(b.ctx, unsafe.Pointer(&p[0]), C.CUdeviceptr(m.addr+uint64(off)), C.size_t(len(p))))
}

func (b *cudaBackend) build(src string, names []string) ([]any, error) {
	c := newCBuild(src, names)
	defer c.free()
	var mod C.CUmodule
	fs := (*[1 << 10]C.CUfunction)(c.out)
	if r := C.weft_cu_load_module(b.ctx, c.src, &mod, c.names, C.int(len(names)), &fs[0], c.log, cLogLen,
		C.int(b.jitOptLevel)); r != 0 {
		return nil, fmt.Errorf("gpu: cuModuleLoadDataEx: %w:\n%s", cudaResult(r), C.GoString(c.log))
	}
	b.mods = append(b.mods, mod)
	out := make([]any, len(names))
	for i := range names {
		out[i] = fs[i]
	}
	return out, nil
}

func (b *cudaBackend) launch(f any, a launchArgs) error {
	var grid, block [3]C.uint
	for i := range 3 {
		grid[i], block[i] = C.uint(a.grid[i]), C.uint(a.block[i])
	}
	return cuErr("cuLaunchKernel", C.weft_cu_launch(b.ctx, f.(C.CUfunction), C.uint64_t(a.typed.addr+uint64(a.toff)),
		C.uint64_t(a.packed.addr+uint64(a.poff)), C.uint64_t(a.tab.addr), C.uint64_t(a.q0), C.uint64_t(a.n),
		&grid[0], &block[0]))
}

// launchAsync enqueues the kernel on the device's stream and returns the
// event recorded after it.
func (b *cudaBackend) launchAsync(f any, a launchArgs) (any, error) {
	if b.stream == nil {
		if err := cuErr("cuStreamCreate", C.weft_cu_stream(b.ctx, &b.stream)); err != nil {
			return nil, err
		}
	}
	var grid, block [3]C.uint
	for i := range 3 {
		grid[i], block[i] = C.uint(a.grid[i]), C.uint(a.block[i])
	}
	var ev C.CUevent
	if err := cuErr("cuLaunchKernel", C.weft_cu_launch_async(b.ctx, f.(C.CUfunction), b.stream, C.uint64_t(a.typed.addr+uint64(a.toff)),
		C.uint64_t(a.packed.addr+uint64(a.poff)), C.uint64_t(a.tab.addr), C.uint64_t(a.q0), C.uint64_t(a.n),
		&grid[0], &block[0], &ev)); err != nil {
		return nil, err
	}
	return ev, nil
}

func (b *cudaBackend) query(ev any) (bool, error) {
	r := C.weft_cu_event_query(b.ctx, ev.(C.CUevent))
	if r == 600 { // CUDA_ERROR_NOT_READY
		return false, nil
	}
	return true, cuErr("cuEventQuery", r)
}

func (b *cudaBackend) wait(ev any) error {
	return cuErr("cuEventSynchronize", C.weft_cu_event_wait(b.ctx, ev.(C.CUevent)))
}

func (b *cudaBackend) release(ev any) { C.weft_cu_event_destroy(b.ctx, ev.(C.CUevent)) }

func (b *cudaBackend) close() error {
	if b.stream != nil {
		C.weft_cu_stream_destroy(b.ctx, b.stream)
		b.stream = nil
	}
	for _, m := range b.mods {
		C.weft_cu_unload(b.ctx, m)
	}
	b.mods = nil
	C.weft_cu_close(b.dev)
	return nil
}

// copy2D runs cuMemcpy2D between device buffers (the benchmark's DMA
// baseline for strided layouts).
func (b *cudaBackend) copy2D(dst mem, dpitch int64, src mem, soff, spitch, width, height int64) error {
	return cuErr("cuMemcpy2D", C.weft_cu_copy2d(b.ctx, C.CUdeviceptr(dst.addr), C.size_t(dpitch),
		C.CUdeviceptr(src.addr+uint64(soff)), C.size_t(spitch), C.size_t(width), C.size_t(height)))
}

// copies runs one cuMemcpyDtoD per block (the per-block DMA baseline).
func (b *cudaBackend) copies(dst, src mem, offs, lens []int64, at int64) error {
	if len(offs) == 0 {
		return nil
	}
	o := cInt64s(offs, lens)
	defer C.free(unsafe.Pointer(o))
	return cuErr("cuMemcpyDtoD", C.weft_cu_copies(b.ctx, C.CUdeviceptr(dst.addr+uint64(at)), C.CUdeviceptr(src.addr),
		(*C.int64_t)(unsafe.Pointer(o)), (*C.int64_t)(unsafe.Add(unsafe.Pointer(o), 8*len(offs))), C.int(len(offs))))
}

// rect is one 2-D copy: height rows of width bytes, src rows spitch apart
// from byte soff, dst rows dpitch apart from byte doff (cuMemcpy2D).
func (b *cudaBackend) rect(dst mem, doff, dpitch int64, src mem, soff, spitch, width, height int64) error {
	return cuErr("cuMemcpy2D", C.weft_cu_rect(b.ctx, C.CUdeviceptr(dst.addr+uint64(doff)), C.size_t(dpitch),
		C.CUdeviceptr(src.addr+uint64(soff)), C.size_t(spitch), C.size_t(width), C.size_t(height)))
}

// copyList copies lens[i] bytes from src at soffs[i] to dst at doffs[i],
// one cuMemcpyDtoD each.
func (b *cudaBackend) copyList(dst, src mem, doffs, soffs, lens []int64) error {
	if len(lens) == 0 {
		return nil
	}
	o := cInt64s3(doffs, soffs, lens)
	defer C.free(unsafe.Pointer(o))
	n := len(lens)
	return cuErr("cuMemcpyDtoD", C.weft_cu_copylist(b.ctx, C.CUdeviceptr(dst.addr), C.CUdeviceptr(src.addr),
		o, (*C.int64_t)(unsafe.Add(unsafe.Pointer(o), 8*n)), (*C.int64_t)(unsafe.Add(unsafe.Pointer(o), 16*n)), C.int(n)))
}
