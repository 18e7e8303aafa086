package onesided

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/internal/testenv"
)

// BenchmarkDevicePut: one typed Put of 1 MiB (int32 triples every 20
// bytes: 12-byte blocks) into a contiguous region of the other rank's
// window, through libfabric shm, completed by a Flush, side by side: from
// GPU memory (gpu: PutDevice, packed by kernels started without waiting
// into the window's chunk buffers mapped into the device; gpu-sync: each
// chunk's pack waited for before the next starts), the same by hand (staged: PackBytes
// into host memory, then a contiguous Put), and the host typed Put of the
// same layout in host memory (host: PutTyped). It runs on CUDA device 0
// when there is one, else on OpenCL device 0: on pocl these are CPU
// figures.
func BenchmarkDevicePut(b *testing.B) { benchDeviceRMA(b, false) }

// BenchmarkDeviceGet is BenchmarkDevicePut's reverse: one typed Get of
// 1 MiB from the other rank's window into the 12-byte blocks: GetDevice
// (gpu: a kernel per chunk, started as its reads complete; gpu-sync:
// each waited for at once), by hand (staged: a contiguous Get into host
// memory, then UnpackBytes) and the host typed Get (host: GetTyped).
func BenchmarkDeviceGet(b *testing.B) { benchDeviceRMA(b, true) }

func benchDeviceRMA(b *testing.B, get bool) {
	_, statErr := os.Stat("/dev/nvidiactl")
	d, err := gpu.OpenCUDA(0)
	if statErr != nil && err != nil && os.Getuid() == 0 {
		os.Remove("/dev/nvidiactl") // cuInit as root creates it
	}
	if err != nil {
		d, err = gpu.OpenOpenCL(0)
	}
	if errors.Is(err, errs.ErrNotSupported) {
		testenv.Skip(b, "opencl", "no CUDA or OpenCL device: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer func() { b.StopTimer(); d.Close() }()
	b.Logf("device %s", d)
	count := (1 << 20) / 12
	ot, err := ddt.Vector(count, 3, 5, ddt.Int32)
	if err == nil {
		err = ot.Commit()
	}
	if err != nil {
		b.Fatal(err)
	}
	n := int(ot.Size())
	on, obase := ddttest.Layout(ot, 1)
	host := make([]byte, on)
	for i := range host {
		host[i] = byte(i*7 + 1)
	}
	src, err := d.Alloc(int64(on))
	if err == nil {
		err = src.Write(0, host)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer src.Free()
	origin := gpu.Typed{Type: ot, Buf: src, Base: obase, Count: 1}
	packed := make([]byte, n)
	run := func(b *testing.B, op func(w *Window) error) {
		b.SetBytes(int64(n))
		benchPair(b, n+64, func(ctx context.Context, w *Window, rank int) {
			if rank == 0 {
				for i := 0; i < b.N; i++ {
					err := op(w)
					if err == nil && !get {
						err = w.Flush(ctx, 1)
					}
					if err != nil {
						b.Error(err)
						break
					}
				}
			}
			if err := w.Fence(ctx); err != nil {
				b.Error(err)
			}
		}, shmOpts...)
	}
	ctx := context.Background()
	dev := func(w *Window) error {
		if get {
			return w.GetDevice(ctx, 1, 0, origin, n, ddt.Byte)
		}
		return w.PutDevice(1, 0, origin, n, ddt.Byte)
	}
	b.Run("gpu", func(b *testing.B) { run(b, dev) })
	b.Run("gpu-sync", func(b *testing.B) {
		devChunkSync.Store(true)
		defer devChunkSync.Store(false)
		run(b, dev)
	})
	b.Run("staged", func(b *testing.B) {
		run(b, func(w *Window) error {
			if get {
				if err := w.Get(1, 0, packed); err != nil {
					return err
				}
				if err := w.Flush(ctx, 1); err != nil {
					return err
				}
				_, err := d.UnpackBytes(ctx, origin, packed, 0)
				return err
			}
			if _, err := d.PackBytes(ctx, packed, origin, 0); err != nil {
				return err
			}
			return w.Put(1, 0, packed)
		})
	})
	b.Run("host", func(b *testing.B) {
		run(b, func(w *Window) error {
			if get {
				return w.GetTyped(ctx, 1, 0, host[obase:], 1, ot, n, ddt.Byte)
			}
			return w.PutTyped(1, 0, host[obase:], 1, ot, n, ddt.Byte)
		})
	})
}
