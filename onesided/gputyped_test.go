package onesided

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/internal/testenv"
)

// gpuDevice opens OpenCL device 0 (pocl here) once for the test, or
// skips (feature "opencl").
func gpuDevice(t *testing.T) *gpu.Device {
	t.Helper()
	d, err := gpu.OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		testenv.Skip(t, "opencl", "%v (deploy/install-gpu-tools.sh installs pocl)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// deviceScenario: each rank puts a strided int32 layout of count blocks
// of 12 bytes from GPU memory into the next rank's window as a layout of
// 600-byte blocks,
// fences, checks the window byte for byte (guard bytes before and after
// the target layout untouched), then gets it back into a fresh GPU
// buffer filled with 0x5A and checks every byte of it.
func deviceScenario(ctx context.Context, g Group, d *gpu.Device, count int, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	right, left := (me+1)%n, (me+n-1)%n
	ot, err := ddt.Vector(count, 3, 5, ddt.Int32)
	if err != nil {
		return err
	}
	tt, err := ddt.Vector(count/50, 150, 160, ddt.Int32) // count a multiple of 50: blocks of 600 bytes
	if err != nil {
		return err
	}
	for _, t := range []*ddt.Type{ot, tt} {
		if err := t.Commit(); err != nil {
			return err
		}
	}
	const guard = 64
	tn, tbase := ddttest.Layout(tt, 1)
	w, err := Allocate(ctx, g, tn+2*guard, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	for i := range w.Bytes() {
		w.Bytes()[i] = 0xA5
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	on, obase := ddttest.Layout(ot, 1)
	fillOrigin := func(rank int) []byte {
		b := make([]byte, on)
		for i := range b {
			b[i] = byte(i*7 + rank*13 + 1)
		}
		return b
	}
	src, err := d.Alloc(int64(on))
	if err != nil {
		return err
	}
	defer src.Free()
	if err := src.Write(0, fillOrigin(me)); err != nil {
		return err
	}
	off := guard + int(tbase)
	if err := w.PutDevice(right, off, gpu.Typed{Type: ot, Buf: src, Base: obase, Count: 1}, 1, tt); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	// The reference is ddt's own pack and unpack (checked against
	// ddttest's byte-wise reference by ddt's tests): fast at 1.3 MB.
	stream := refPack(ot, fillOrigin(left), obase)
	want := bytes.Repeat([]byte{0xA5}, tn+2*guard)
	if _, err := tt.UnpackRange(want[guard:], stream, tbase, 1, 0); err != nil {
		return err
	}
	if !bytes.Equal(w.Bytes(), want) {
		return fmt.Errorf("rank %d: PutDevice of %d bytes from rank %d: window differs", me, len(stream), left)
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	dst, err := d.Alloc(int64(on + 2*guard))
	if err != nil {
		return err
	}
	defer dst.Free()
	dfill := bytes.Repeat([]byte{0x5A}, on+2*guard)
	if err := dst.Write(0, dfill); err != nil {
		return err
	}
	if err := w.GetDevice(ctx, right, off, gpu.Typed{Type: ot, Buf: dst, Base: guard + obase, Count: 1}, 1, tt); err != nil {
		return err
	}
	got := make([]byte, len(dfill))
	if err := dst.Read(0, got); err != nil {
		return err
	}
	dwant := append([]byte(nil), dfill...)
	if _, err := ot.UnpackRange(dwant[guard:], refPack(ot, fillOrigin(me), obase), obase, 1, 0); err != nil {
		return err
	}
	if !bytes.Equal(got, dwant) {
		return fmt.Errorf("rank %d: GetDevice of %d bytes: GPU buffer differs", me, ot.Size())
	}
	return w.Fence(ctx)
}

// refPack packs one element of t in typed (displacement 0 at base) with
// ddt's pack.
func refPack(t *ddt.Type, typed []byte, base int64) []byte {
	out := make([]byte, t.Size())
	if _, err := t.PackRange(out, typed, base, 1, 0); err != nil {
		panic(err)
	}
	return out
}

// TestDeviceTyped: PutDevice and GetDevice between ranks, GPU memory on
// pocl, direct store and libfabric shm, in every regime: one 64 KiB
// piece, many pieces, more than the device's 1 MiB staging buffer. Over
// libfabric each chunk is packed into and unpacked from in place (the
// chunk buffers mapped into the device), a Put's packs started without
// waiting for every free chunk; "net-sync" waits for each pack before
// the next, and "net-copy" forces the fallback through the device's
// staging buffer.
func TestDeviceTyped(t *testing.T) {
	d := gpuDevice(t)
	requireProvider(t, "shm")
	defer devChunkCopy.Store(false)
	defer devChunkSync.Store(false)
	for _, c := range []struct {
		name, path string
		count      int
	}{{"onepiece", "net", 100}, {"pieces", "direct", 20000}, {"pieces", "net", 20000}, {"beyondstage", "net", 110000},
		{"pieces", "net-sync", 20000}, {"pieces", "net-copy", 20000}} {
		t.Run(c.name+"/"+c.path, func(t *testing.T) {
			opts := []Option{WithSharedMemory(ShmOnly)}
			if c.path != "direct" {
				opts = providerCase{"shm", OrderAuto}.opts()
			}
			devChunkCopy.Store(c.path == "net-copy")
			devChunkSync.Store(c.path == "net-sync")
			copied, mapped, async := devChunkStats[0].Load(), devChunkStats[1].Load(), devChunkAsync.Load()
			runRanks(t, 2, func(ctx context.Context, g Group) error {
				return deviceScenario(ctx, g, d, c.count, opts...)
			})
			copied, mapped, async = devChunkStats[0].Load()-copied, devChunkStats[1].Load()-mapped, devChunkAsync.Load()-async
			t.Logf("pieces through the staging buffer %d, in mapped chunks %d (packs started without waiting %d)", copied, mapped, async)
			inPlace := c.path == "net" || c.path == "net-sync"
			if inPlace && (mapped == 0 || copied != 0) || !inPlace && mapped != 0 {
				t.Fatalf("%s: %d pieces staged, %d in mapped chunks", c.path, copied, mapped)
			}
			if (async > 0) != (c.path == "net") {
				t.Fatalf("%s: %d packs started without waiting", c.path, async)
			}
		})
	}
}

// TestDeviceTypedCUDA: PutDevice and GetDevice with the origin in CUDA
// device memory (make gpu-check on a machine with an NVIDIA GPU).
func TestDeviceTypedCUDA(t *testing.T) {
	_, statErr := os.Stat("/dev/nvidiactl")
	d, err := gpu.OpenCUDA(0)
	if statErr != nil && err != nil && os.Getuid() == 0 {
		os.Remove("/dev/nvidiactl") // cuInit as root creates it
	}
	if errors.Is(err, errs.ErrNotSupported) {
		testenv.Skip(t, "gpu", "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	requireProvider(t, "shm")
	for _, count := range []int{100, 110000} {
		runRanks(t, 2, func(ctx context.Context, g Group) error {
			return deviceScenario(ctx, g, d, count, providerCase{"shm", OrderAuto}.opts()...)
		})
	}
}

// TestDeviceClosedMidPut: a device closed while PutDevice (many chunks,
// packed in place into the mapped chunk buffers) is in flight on both
// ranks: each ends with gpu.ErrClosed or completes, nothing hangs or
// touches freed memory (-race), the window forgets the closed device's
// mapping and fences and frees cleanly.
func TestDeviceClosedMidPut(t *testing.T) {
	d := gpuDevice(t)
	requireProvider(t, "shm")
	const count = 20000
	ot, err := ddt.Vector(count, 3, 5, ddt.Int32)
	if err == nil {
		err = ot.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	on, obase := ddttest.Layout(ot, 1)
	started := make(chan struct{}, 2)
	closed := make(chan error, 1)
	done := make(chan struct{}) // closed once d.Close has returned
	go func() {
		<-started
		<-started
		time.Sleep(time.Millisecond)
		closed <- d.Close()
		close(done)
	}()
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		w, err := Allocate(ctx, g, int(ot.Size()), providerCase{"shm", OrderAuto}.opts()...)
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, w.Free)
		if err := w.Fence(ctx); err != nil {
			return err
		}
		src, err := d.Alloc(int64(on))
		if err != nil {
			return err
		}
		// One put before the close maps the chunk buffers into the device.
		if err := w.PutDevice((g.Rank()+1)%2, 0, gpu.Typed{Type: ot, Buf: src, Base: obase, Count: 1}, int(ot.Size()), ddt.Byte); err != nil {
			return err
		}
		f := netFab(w.net)
		f.devMu.Lock()
		_, mapped := f.devMaps[d]
		f.devMu.Unlock()
		if !mapped {
			return fmt.Errorf("rank %d: no mapping of the chunk buffers into the device", g.Rank())
		}
		started <- struct{}{}
		// Put the layout a few times over: the device closes during one of them.
		for range 20 {
			err = w.PutDevice((g.Rank()+1)%2, 0, gpu.Typed{Type: ot, Buf: src, Base: obase, Count: 1}, int(ot.Size()), ddt.Byte)
			if err != nil {
				break
			}
		}
		if err != nil && !errors.Is(err, gpu.ErrClosed) {
			return fmt.Errorf("PutDevice on a device closed under it: %w, want gpu.ErrClosed", err)
		}
		t.Logf("rank %d: %v", g.Rank(), err)
		<-done
		f.devMu.Lock()
		_, kept := f.devMaps[d]
		f.devMu.Unlock()
		if kept {
			return fmt.Errorf("rank %d: the window keeps the closed device's mapping", g.Rank())
		}
		return w.Fence(ctx)
	})
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
