package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// openCLDevice opens OpenCL device 0 (pocl on the CPU here) or skips
// (feature "opencl": deploy/install-gpu-tools.sh installs pocl).
func openCLDevice(t testing.TB) *gpu.Device {
	t.Helper()
	d, err := gpu.OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		testenv.Skip(t, "opencl", "%v (deploy/install-gpu-tools.sh installs pocl)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// gpuLayouts are the sender's and receiver's types of the GPU tests: a
// column of int32 triples sent, received as a vector of another stride
// (the same type signature), both with kernels on every device.
func gpuLayouts(t testing.TB) (send, recv *ddt.Type) {
	t.Helper()
	s, err := ddt.Vector(1, 3, 5, ddt.Int32)
	if err == nil {
		s, err = ddt.Resized(s, 0, 20)
	}
	if err == nil {
		err = s.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	r, err := ddt.Vector(1, 3, 4, ddt.Int32)
	if err == nil {
		r, err = ddt.Resized(r, 0, 28)
	}
	if err == nil {
		err = r.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

const gpuGuard = 64

// gpuSource returns count elements of t in a device buffer, guard bytes
// on both sides, filled from salt, with the packed stream they hold.
func gpuSource(t testing.TB, d *gpu.Device, ty *ddt.Type, count, salt int) (gpu.Typed, []byte) {
	t.Helper()
	n, base := ddttest.Layout(ty, count)
	host := make([]byte, n+2*gpuGuard)
	for i := range host {
		host[i] = byte(i*31 + salt)
	}
	b, err := d.Alloc(int64(len(host)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	if err := b.Write(0, host); err != nil {
		t.Fatal(err)
	}
	return gpu.Typed{Type: ty, Buf: b, Base: base + gpuGuard, Count: count}, ddttest.Pack(ty, host[gpuGuard:gpuGuard+n], base, count)
}

// gpuDest returns count elements of t in a device buffer filled with
// 0x5A, and a function checking that it holds stream unpacked into the
// type and nothing else changed (guard bytes and the gaps included).
func gpuDest(t testing.TB, d *gpu.Device, ty *ddt.Type, count int) (gpu.Typed, func(stream []byte) error) {
	t.Helper()
	n, base := ddttest.Layout(ty, count)
	fill := bytes.Repeat([]byte{0x5A}, n+2*gpuGuard)
	b, err := d.Alloc(int64(len(fill)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	if err := b.Write(0, fill); err != nil {
		t.Fatal(err)
	}
	check := func(stream []byte) error {
		got := make([]byte, len(fill))
		if err := b.Read(0, got); err != nil {
			return err
		}
		want := append(append(fill[:gpuGuard:gpuGuard], ddttest.UnpackRange(ty, fill[gpuGuard:gpuGuard+n], stream, base, count, 0)...), fill[gpuGuard+n:]...)
		if !bytes.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					return fmt.Errorf("GPU buffer differs first at byte %d of %d (%#x, want %#x)", i, len(got), got[i], want[i])
				}
			}
		}
		return nil
	}
	return gpu.Typed{Type: ty, Buf: b, Base: base + gpuGuard, Count: count}, check
}

// gpuRegimes are the element counts of the regimes: one eager segment,
// a pipeline of a few segments (within the ring), a message longer than
// the whole ring.
func gpuRegimes(seg, depth, eager int, size int64) []gpuRegime {
	return []gpuRegime{
		{"eager", int(int64(eager/2) / size)},
		{"pipeline", int(int64(3*seg+seg/3) / size)},
		{"beyondring", int(int64(2*depth*seg+100) / size)},
	}
}

type gpuRegime struct {
	name  string
	count int
}

// TestDeviceTypedPair: typed messages from GPU memory to GPU memory (and
// GPU→host, host→GPU) between two endpoints of one process over shm, on
// pocl, in every regime, byte for byte with guard bytes; the pipeline's
// packs ran as asynchronous launches into the device's ring. Also in
// match-header mode, where each ring segment carries the header in front
// of what the kernel packed.
func TestDeviceTypedPair(t *testing.T) {
	d := openCLDevice(t)
	defer d.Close()
	d.SetMethod(gpu.MethodKernel)                 // the kernel pipeline, whatever the cost model would choose
	t.Setenv(endpoint.EnvNodeTransport, "fabric") // libfabric's typed paths, not the node transport's
	defer endpoint.ForceMatchHeader(false)
	for _, hdr := range []bool{false, true} {
		endpoint.ForceMatchHeader(hdr)
		a, b, ctx := singletonPair(t)
		if got := endpoint.CommMatchHeader(a); got != hdr {
			t.Fatalf("match-header mode %v, want %v", got, hdr)
		}
		before := endpoint.TypedPaths()
		devicePair(t, ctx, d, a, b)
		after := endpoint.TypedPaths()
		if after[0] == before[0] || after[2] == before[2] {
			t.Fatalf("match header %v: typed paths before %v, after %v: want eager and pipeline messages", hdr, before, after)
		}
	}
	if s := d.Stats(); s.Async == 0 {
		t.Fatalf("no asynchronous pack launch: %+v", s)
	}
}

// TestDeviceTypedErrors: bad GPU arguments are clear errors.
func TestDeviceTypedErrors(t *testing.T) {
	d := openCLDevice(t)
	defer d.Close()
	a, b, _ := singletonPair(t)
	st, _ := gpuLayouts(t)
	buf, err := d.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if _, err := a.IsendDevice(gpu.Typed{Type: st, Buf: buf, Count: 10}, b.Rank(), 1); !errors.Is(err, ddt.ErrBounds) {
		t.Fatalf("10 elements in 100 bytes: %v, want ddt.ErrBounds", err)
	}
	if _, err := b.IrecvDevice(gpu.Typed{Type: st, Count: 1}, a.Rank(), 1); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("no buffer: %v, want ErrInvalid", err)
	}
	raw, _ := ddt.Vector(2, 1, 2, ddt.Int32)
	if _, err := a.IsendDevice(gpu.Typed{Type: raw, Buf: buf, Count: 1}, b.Rank(), 1); err == nil {
		t.Fatal("an uncommitted type was accepted")
	}
}

// gpuMP is the body of the multi-process GPU test: rank 0 sends from GPU
// memory in every regime, rank 1 receives into GPU memory, and back.
func gpuMP(t *testing.T, ctx context.Context, d *gpu.Device, c *endpoint.Comm) {
	st, rt := gpuLayouts(t)
	seg, depth, eager := endpoint.PipeRing(c)
	me := c.Rank()
	for _, g := range gpuRegimes(seg, depth, eager, st.Size()) {
		name, count := g.name, g.count
		for dir := 0; dir < 2; dir++ {
			if me == dir {
				src, _ := gpuSource(t, d, st, count, count+dir)
				if err := c.SendDevice(ctx, src, 1-me, dir); err != nil {
					t.Fatalf("%s: send: %v", name, err)
				}
				continue
			}
			dst, check := gpuDest(t, d, rt, count)
			if _, err := c.RecvDevice(ctx, dst, 1-me, dir); err != nil {
				t.Fatalf("%s: receive: %v", name, err)
			}
			// The sender's stream, rebuilt here from the same fill.
			n, base := ddttest.Layout(st, count)
			host := make([]byte, n+2*gpuGuard)
			for i := range host {
				host[i] = byte(i*31 + count + dir)
			}
			if err := check(ddttest.Pack(st, host[gpuGuard:gpuGuard+n], base, count)); err != nil {
				t.Fatalf("%s, rank %d to %d: %v", name, 1-me, me, err)
			}
		}
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDeviceTypedProcesses: GPU-to-GPU typed messages between 2 processes
// (pocl in each) over libfabric's shm, every regime, both directions
// (tcp;ofi_rxm passes too; left out for make test's time); then the
// sender of a pipelined GPU message is killed in the middle of it and the
// receiver, unpacking into GPU memory, gets ErrPeerGone within its
// timeout, not a hang.
func TestDeviceTypedProcesses(t *testing.T) {
	testenv.Short(t, "GPU messages between processes (pocl starts in each)")
	if !launchtest.IsWorker() {
		prov, env := provEnv("shm", []string{endpoint.EnvTimeout + "=60s"})
		launchtest.RunMayDie(t, 2, prov, 90*time.Second, []int{1}, env...)
		return
	}
	ctx := eptest.Ctx(t, 80*time.Second)
	w, err := endpoint.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := w.Comm()
	d := openCLDevice(t)
	gpuMP(t, ctx, d, c)
	st, rt := gpuLayouts(t)
	const count = 4 << 20 // 48 MiB
	if c.Rank() == 1 {
		src, _ := gpuSource(t, d, st, count, 1)
		if _, err := c.Recv(ctx, make([]byte, 1), 0, 1); err != nil {
			t.Fatal(err)
		}
		r, err := c.IsendDevice(src, 0, 2)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ { // a few chunks go out
			if done, _, err := r.Test(); done || err != nil {
				t.Fatalf("pipelined GPU send of 48 MiB complete after %d tests: %v", i, err)
			}
			time.Sleep(time.Millisecond)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	defer w.Close()
	defer d.Close()
	dst, _ := gpuDest(t, d, rt, count)
	rr, err := c.IrecvDevice(dst, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, []byte{1}, 1, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = rr.Wait(ctx)
	took := time.Since(start)
	if !errors.Is(err, endpoint.ErrPeerGone) || took > 20*time.Second {
		t.Fatalf("receive of a GPU message whose sender died: %v after %v, want ErrPeerGone", err, took)
	}
	t.Logf("receive returned after %v: %v", took, err)
}

// TestDeviceHMEMFallback: GPU messages stage through pinned host memory
// where the provider cannot move device memory itself: tcp does not grant
// FI_HMEM (fi_getinfo asked for it), shm does but the memory here is
// OpenCL's (and without a GPU its CUDA interface is off).
func TestDeviceHMEMFallback(t *testing.T) {
	testenv.Short(t, "two worlds (shm, tcp) for the FI_HMEM choice")
	d := openCLDevice(t)
	defer d.Close()
	b, err := d.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	singleton(t)
	t.Setenv(endpoint.EnvNodeTransport, "fabric")
	for _, c := range []struct{ prov, want string }{
		{"tcp;ofi_rxm", "staging: provider tcp;ofi_rxm does not grant FI_HMEM"},
		{"shm", "staging: opencl memory has no FI_HMEM interface here"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		w, err := endpoint.Init(ctx, endpoint.WithProvider(c.prov))
		if err != nil {
			t.Fatalf("Init %s: %v", c.prov, err)
		}
		eps, err := w.Comm().CreateEndpoints(ctx, 2)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got := endpoint.DeviceTransport(eps[0], b)
		w.Close()
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.prov, got, c.want)
		}
	}
}

// TestDevicePaths: each GPU path, forced, moves every byte (every regime,
// GPU→GPU, GPU→host, host→GPU, guard bytes), and the counters prove
// which ran: the hmem send path (the ring sent from by address, as device
// memory registered with FI_HMEM is; on pocl the device's mapped host
// memory stands in for it) with the measured copy choice, then the
// staging ring with receives through the staging buffer (the fallback
// when nothing can be mapped). Where HMEM is refused (shm with OpenCL
// memory) an unforced ring stages.
func TestDevicePaths(t *testing.T) {
	d := openCLDevice(t)
	defer d.Close()
	t.Setenv(endpoint.EnvNodeTransport, "fabric")
	defer endpoint.ForceDevicePath("")
	defer endpoint.ForceDeviceRecvCopy(false)
	defer endpoint.ForceDeviceSendCopy(false)
	defer endpoint.AssumeDiscreteDevice(false)
	if !d.Integrated() {
		t.Fatalf("%s: not a device sharing the host's memory", d)
	}
	for _, c := range []struct {
		path             string
		copied, discrete bool
	}{{"hmem", false, false}, {"staging", true, false}, {"", false, false}, {"", false, true}} {
		endpoint.ForceDevicePath(c.path)
		endpoint.ForceDeviceRecvCopy(c.copied)
		endpoint.ForceDeviceSendCopy(c.copied)
		endpoint.AssumeDiscreteDevice(c.discrete)
		s0, h0, c0, m0 := endpoint.DevicePaths()
		l0 := endpoint.DeviceLanded()
		sc0, sm0 := endpoint.DeviceSendPaths()
		a, b, ctx := singletonPair(t)
		devicePair(t, ctx, d, a, b)
		s1, h1, c1, m1 := endpoint.DevicePaths()
		l1 := endpoint.DeviceLanded()
		sc1, sm1 := endpoint.DeviceSendPaths()
		t.Logf("%q: rings staging %d hmem %d, pieces copied %d mapped %d, landing chunks %d; eager sends copied %d mapped %d", c.path, s1-s0, h1-h0, c1-c0, m1-m0, l1-l0, sc1-sc0, sm1-sm0)
		// Eager GPU sends pack in place in the mapped segment buffers
		// unless the staging copy is forced.
		if c.copied && (sm1 != sm0 || sc1 == sc0) || !c.copied && sm1 == sm0 {
			t.Fatalf("%q: eager sends copied %d→%d, mapped %d→%d", c.path, sc0, sc1, sm0, sm1)
		}
		// Pipelined receives gather their segments into landing chunks
		// (one unpack each) unless the per-piece copy is forced.
		if (l1 > l0) == c.copied {
			t.Fatalf("%q: landing chunks %d→%d", c.path, l0, l1)
		}
		wantHMEM := c.path == "hmem"
		if (h1 > h0) != wantHMEM || (s1 > s0) == wantHMEM {
			t.Fatalf("%q: rings staging %d→%d, hmem %d→%d", c.path, s0, s1, h0, h1)
		}
		// As a discrete GPU, eager pieces go through the staging buffer,
		// not read from the mapped bounce buffers; landing chunks stay.
		if (c.copied || c.discrete) && (m1 != m0 || c1 == c0) || !c.copied && !c.discrete && m1 == m0 {
			t.Fatalf("%q: pieces copied %d→%d, mapped %d→%d", c.path, c0, c1, m0, m1)
		}
		// A contiguous message from mapped host memory of the device (the
		// stand-in has an address): on the hmem path its segments go
		// straight from the user's buffer, registered for the message.
		seg, _, _ := endpoint.PipeRing(a)
		buf, err := d.AllocHost(int64(3*seg + 100))
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf.Bytes() {
			buf.Bytes()[i] = byte(i*5 + 1)
		}
		dir0 := endpoint.DeviceDirectSends()
		got := make([]byte, len(buf.Bytes()))
		errc := make(chan error, 1)
		go func() {
			errc <- a.SendDevice(ctx, gpu.Typed{Type: ddt.Byte, Buf: buf, Count: len(got)}, b.Rank(), 4)
		}()
		if _, err := b.Recv(ctx, got, a.Rank(), 4); err != nil || <-errc != nil {
			t.Fatalf("%q: contiguous GPU message: %v", c.path, err)
		}
		if !bytes.Equal(got, buf.Bytes()) {
			t.Fatalf("%q: contiguous GPU message: bytes differ", c.path)
		}
		if dir := endpoint.DeviceDirectSends() - dir0; (dir == 1) != wantHMEM {
			t.Fatalf("%q: %d sends straight from the user's buffer", c.path, dir)
		}
		buf.Free()
	}
}

// TestDeviceClosedFirst: a GPU device closed before the endpoints that
// sent and received with it leaves nothing allocated on it (the send ring
// and the mapped bounce buffers are freed with the device), and the
// endpoints close cleanly afterwards.
func TestDeviceClosedFirst(t *testing.T) {
	d := openCLDevice(t)
	t.Setenv(endpoint.EnvNodeTransport, "fabric")
	a, b, ctx := singletonPair(t)
	st, rt := gpuLayouts(t)
	seg, _, _ := endpoint.PipeRing(a)
	count := 3 * seg / int(st.Size())
	src, stream := gpuSource(t, d, st, count, 1)
	dst, check := gpuDest(t, d, rt, count)
	errc := make(chan error, 1)
	go func() { errc <- a.SendDevice(ctx, src, b.Rank(), 3) }()
	if _, err := b.RecvDevice(ctx, dst, a.Rank(), 3); err != nil || <-errc != nil {
		t.Fatalf("GPU message: %v", err)
	}
	if err := check(stream); err != nil {
		t.Fatal(err)
	}
	if n := d.Stats().Buffers; n < 4 { // source, destination, ring, mapped bounce buffers
		t.Fatalf("%d live buffers on the device, want the ring and the mapping among them", n)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n := d.Stats().Buffers; n != 0 {
		t.Fatalf("%d buffers left on the closed device", n)
	}
	// A message from the closed device's memory fails; the endpoints,
	// whose ring and mapping the device freed, close without error.
	if err := a.SendDevice(ctx, src, b.Rank(), 4); !errors.Is(err, gpu.ErrClosed) {
		t.Fatalf("SendDevice from a closed device: %v, want gpu.ErrClosed", err)
	}
	for _, c := range []*endpoint.Comm{a, b} {
		if err := c.Free(); err != nil {
			t.Fatalf("endpoint closed after its device: %v", err)
		}
	}
}

// TestDeviceTypedCUDA: the pair test's messages from and into CUDA device
// memory (every regime, byte for byte with guard bytes), on a machine
// with an NVIDIA GPU (make gpu-check); the pipeline's packs are stream
// launches with an event per segment.
func TestDeviceTypedCUDA(t *testing.T) {
	d, err := openCUDA()
	if errors.Is(err, errs.ErrNotSupported) {
		testenv.Skip(t, "gpu", "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t.Setenv(endpoint.EnvNodeTransport, "fabric")
	d.SetMethod(gpu.MethodKernel)
	a, b, ctx := singletonPair(t)
	devicePair(t, ctx, d, a, b)
	if s := d.Stats(); s.Async == 0 {
		t.Fatalf("no stream launch: %+v", s)
	}
	// The measured choice (kernel or copies) and the zero-copy receive.
	d.SetMethod(gpu.MethodAuto)
	_, _, copied, mapped := endpoint.DevicePaths()
	devicePair(t, ctx, d, a, b)
	// Eager pieces are unpacked from the mapped bounce buffers where the
	// GPU shares the host's memory, through the staging buffer on a
	// discrete one.
	_, _, c, m := endpoint.DevicePaths()
	if d.Integrated() && m == mapped || !d.Integrated() && (m != mapped || c == copied) {
		t.Fatalf("integrated %v: pieces copied %d→%d, mapped %d→%d", d.Integrated(), copied, c, mapped, m)
	}
	t.Logf("after the auto pass: %+v", d.Stats())
	buf, err := d.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	st, hm, cp, mp := endpoint.DevicePaths()
	t.Logf("integrated %v; CUDA memory on shm: %s; rings staging %d hmem %d; pieces copied %d mapped %d; landing chunks %d", d.Integrated(), endpoint.DeviceTransport(a, buf), st, hm, cp, mp, endpoint.DeviceLanded())
}

// devicePair sends from GPU memory of d to GPU memory (and GPU→host,
// host→GPU) from a to b in every regime and checks every byte.
func devicePair(t *testing.T, ctx context.Context, d *gpu.Device, a, b *endpoint.Comm) {
	st, rt := gpuLayouts(t)
	seg, depth, eager := endpoint.PipeRing(a)
	for _, g := range gpuRegimes(seg, depth, eager, st.Size()) {
		name, count := g.name, g.count
		src, stream := gpuSource(t, d, st, count, count)
		dst, check := gpuDest(t, d, rt, count)
		// The GPU receives are posted before their sends start, so that
		// no message waits in the unexpected queue (a host copy, whose
		// pieces always go through the staging buffer) and the counters
		// of TestDevicePaths see the path each regime takes.
		errc := make(chan error, 1)
		stt, err := recvDevice(ctx, b, dst, a.Rank(), 7, func() { errc <- a.SendDevice(ctx, src, b.Rank(), 7) })
		if err == nil {
			err = <-errc
		}
		if err != nil {
			t.Fatalf("%s (%d bytes): %v", name, len(stream), err)
		}
		if stt.Count != len(stream) {
			t.Fatalf("%s: received %d bytes, want %d", name, stt.Count, len(stream))
		}
		if err := check(stream); err != nil {
			t.Fatalf("%s (%d bytes): %v", name, len(stream), err)
		}
		// GPU → host layout, host layout → GPU: the same stream.
		n, base := ddttest.Layout(rt, count)
		host := make([]byte, n)
		go func() { errc <- a.SendDevice(ctx, src, b.Rank(), 8) }()
		if _, err := b.RecvTyped(ctx, host[base:], count, rt, a.Rank(), 8); err != nil || <-errc != nil {
			t.Fatalf("%s: GPU to host: %v", name, err)
		}
		if !bytes.Equal(ddttest.Pack(rt, host, base, count), stream) {
			t.Fatalf("%s: GPU to host: bytes differ", name)
		}
		dst2, check2 := gpuDest(t, d, rt, count)
		if _, err := recvDevice(ctx, b, dst2, a.Rank(), 9, func() { errc <- a.SendTyped(ctx, host[base:], count, rt, b.Rank(), 9) }); err != nil || <-errc != nil {
			t.Fatalf("%s: host to GPU: %v", name, err)
		}
		if err := check2(stream); err != nil {
			t.Fatalf("%s: host to GPU: %v", name, err)
		}
	}
}

// recvDevice posts a GPU receive on c, then starts send in its own
// goroutine and waits for the receive.
func recvDevice(ctx context.Context, c *endpoint.Comm, dst gpu.Typed, src, tag int, send func()) (endpoint.Status, error) {
	r, err := c.IrecvDevice(dst, src, tag)
	if err != nil {
		return endpoint.Status{}, err
	}
	go send()
	return r.Wait(ctx)
}

// openCUDA opens CUDA device 0; as root on a machine without a GPU,
// cuInit creates /dev/nvidiactl, which is removed again.
func openCUDA() (*gpu.Device, error) {
	_, statErr := os.Stat("/dev/nvidiactl")
	d, err := gpu.OpenCUDA(0)
	if statErr != nil && err != nil && os.Getuid() == 0 {
		os.Remove("/dev/nvidiactl")
	}
	return d, err
}

// TestDeviceClosedMidSend: a device closed while a large pipelined GPU
// send and its GPU receive are in flight (on the hmem path and on the
// staging ring): both end, with gpu.ErrClosed or complete, nothing hangs
// or reads freed memory (-race), the endpoints forget the device and
// close cleanly.
func TestDeviceClosedMidSend(t *testing.T) {
	t.Setenv(endpoint.EnvNodeTransport, "fabric")
	defer endpoint.ForceDevicePath("")
	for _, path := range []string{"hmem", "staging"} {
		endpoint.ForceDevicePath(path)
		d := openCLDevice(t)
		a, b, ctx := singletonPair(t)
		st, _ := gpuLayouts(t)
		seg, depth, _ := endpoint.PipeRing(a)
		sr, rr, src, dst := startDeviceMessage(t, d, a, b, 4*depth*seg/int(st.Size()))
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		errc := make(chan error, 2)
		go func() { _, err := sr.Wait(ctx); errc <- err }()
		go func() { _, err := rr.Wait(ctx); errc <- err }()
		// The receiving endpoint keeps being driven, as its process
		// would keep calling in, after its receive has failed: the
		// segments already on the network complete only so (the
		// sender's close hook waits for them).
		stop := make(chan struct{})
		driven := make(chan struct{})
		go func() {
			defer close(driven)
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _, _ = b.Iprobe(endpoint.AnySource, endpoint.AnyTag)
				runtime.Gosched()
			}
		}()
		time.Sleep(2 * time.Millisecond)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := a.IsendDevice(src, b.Rank(), 4); !errors.Is(err, gpu.ErrClosed) {
			t.Fatalf("%s: IsendDevice from a closed device: %v, want gpu.ErrClosed", path, err)
		}
		if _, err := b.IrecvDevice(dst, a.Rank(), 4); !errors.Is(err, gpu.ErrClosed) {
			t.Fatalf("%s: IrecvDevice into a closed device: %v, want gpu.ErrClosed", path, err)
		}
		for range 2 {
			err := <-errc
			if err != nil && !errors.Is(err, gpu.ErrClosed) {
				t.Fatalf("%s: operation on the device closed under it: %v, want gpu.ErrClosed or success", path, err)
			}
			t.Logf("%s: %v", path, err)
		}
		close(stop)
		<-driven
		cancel()
		for _, c := range []*endpoint.Comm{a, b} {
			if n := endpoint.DeviceEntries(c, d); n != 0 {
				t.Fatalf("%s: the endpoint keeps %d entries of the closed device", path, n)
			}
			if err := c.Free(); err != nil {
				t.Fatalf("%s: endpoint closed after its device: %v", path, err)
			}
		}
	}
}

// TestDeviceClosedStalledReceiver: a device closed under a pipelined GPU
// send whose segments cannot complete, because the receiving endpoint is
// no longer driven (tcp;ofi_rxm: a large segment waits for the receiver):
// the close hook's bounded wait gives up and the send ends with
// gpu.ErrClosed instead of waiting for ever; once the receiver is driven
// again what was on the network drains and both endpoints free cleanly.
func TestDeviceClosedStalledReceiver(t *testing.T) {
	testenv.Short(t, "a world on tcp;ofi_rxm")
	t.Setenv(endpoint.EnvNodeTransport, "fabric")
	endpoint.ForceDevicePath("hmem")
	defer endpoint.ForceDevicePath("")
	endpoint.SetDeviceCloseWait(300 * time.Millisecond)
	defer endpoint.SetDeviceCloseWait(0)
	d := openCLDevice(t)
	a, b, ctx := providerPair(t, "tcp;ofi_rxm")
	st, _ := gpuLayouts(t)
	sr, rr, _, _ := startDeviceMessage(t, d, a, b, (32<<20)/int(st.Size()))
	// Both sides are driven until the receiver has unpacked a chunk.
	for l0 := endpoint.DeviceLanded(); endpoint.DeviceLanded() == l0; {
		for _, r := range []*endpoint.Request{rr, sr} {
			if done, _, err := r.Test(); done || err != nil {
				t.Fatalf("the message ended before the close: %v", err)
			}
		}
		if ctx.Err() != nil {
			t.Fatal("no chunk landed")
		}
	}
	// Only the sender is driven from now on.
	sent := make(chan error, 1)
	go func() { _, err := sr.Wait(ctx); sent <- err }()
	time.Sleep(50 * time.Millisecond)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sent:
		if !errors.Is(err, gpu.ErrClosed) {
			t.Fatalf("send from the closed device: %v, want gpu.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the send still waits 5 s after its device was closed")
	}
	if _, err := rr.Wait(ctx); !errors.Is(err, gpu.ErrClosed) {
		t.Fatalf("receive into the closed device: %v, want gpu.ErrClosed", err)
	}
	// The receiver resumes; what was on the network drains.
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		for _, c := range []*endpoint.Comm{a, b} {
			if _, _, err := c.Iprobe(endpoint.AnySource, endpoint.AnyTag); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []*endpoint.Comm{a, b} {
		if err := c.Free(); err != nil {
			t.Fatalf("endpoint freed after the close: %v", err)
		}
	}
}

// startDeviceMessage starts a GPU message of count elements of the GPU
// tests' layouts from a to b (tag 3), the receive posted first, and
// returns the requests and the GPU data.
func startDeviceMessage(t *testing.T, d *gpu.Device, a, b *endpoint.Comm, count int) (sr, rr *endpoint.Request, src, dst gpu.Typed) {
	t.Helper()
	st, rt := gpuLayouts(t)
	src, _ = gpuSource(t, d, st, count, 1)
	dst, _ = gpuDest(t, d, rt, count)
	rr, err := b.IrecvDevice(dst, a.Rank(), 3)
	if err != nil {
		t.Fatal(err)
	}
	sr, err = a.IsendDevice(src, b.Rank(), 3)
	if err != nil {
		t.Fatal(err)
	}
	return sr, rr, src, dst
}
