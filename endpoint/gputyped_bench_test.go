package endpoint_test

import (
	"testing"

	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/endpoint"
)

// BenchmarkDeviceTypedSend: one typed message of 1 MiB (int32 triples
// every 20 bytes: 12-byte blocks) between two endpoints of one process
// over libfabric shm, side by side: from GPU memory into GPU memory by
// the kernel pipeline (gpu: a pack kernel per chunk of the sender's ring,
// the receiver gathering the segments into landing chunks, an unpack
// kernel per chunk), the same with every received segment unpacked on its
// own through the device's staging buffer (gpu-copyrecv, the fallback),
// the same by hand with the device's staging
// (PackBytes, Send, Recv, UnpackBytes: staged), and the host typed
// message of the same layout in host memory (host: the JIT's pack into
// the pipeline). It runs on CUDA device 0 when there is one, else on
// OpenCL device 0: on pocl these are CPU figures.
func BenchmarkDeviceTypedSend(b *testing.B) {
	d, err := openCUDA()
	if err != nil {
		d = openCLDevice(b)
	}
	defer d.Close()
	b.Logf("device %s", d)
	b.Setenv(endpoint.EnvNodeTransport, "fabric")
	a, c, ctx := benchPair(b, false)
	st, rt := gpuLayouts(b)
	count := (1 << 20) / int(st.Size())
	src, stream := gpuSource(b, d, st, count, 1)
	dst, _ := gpuDest(b, d, rt, count)
	n := len(stream)
	hn, hbase := ddttest.Layout(st, count)
	host := make([]byte, hn)
	rn, rbase := ddttest.Layout(rt, count)
	hostDst := make([]byte, rn)
	packed := make([]byte, n)
	run := func(b *testing.B, send func() error, recv func() error) {
		b.SetBytes(int64(n))
		for b.Loop() {
			errc := make(chan error, 1)
			go func() { errc <- send() }()
			if err := recv(); err != nil {
				b.Fatal(err)
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("gpu", func(b *testing.B) {
		run(b, func() error { return a.SendDevice(ctx, src, c.Rank(), 1) },
			func() error { _, err := c.RecvDevice(ctx, dst, a.Rank(), 1); return err })
	})
	// The same messages with every received segment copied into the
	// device's staging buffer and unpacked on its own (the fallback),
	// instead of gathered into landing chunks.
	b.Run("gpu-copyrecv", func(b *testing.B) {
		endpoint.ForceDeviceRecvCopy(true)
		defer endpoint.ForceDeviceRecvCopy(false)
		run(b, func() error { return a.SendDevice(ctx, src, c.Rank(), 1) },
			func() error { _, err := c.RecvDevice(ctx, dst, a.Rank(), 1); return err })
	})
	b.Run("staged", func(b *testing.B) {
		run(b, func() error {
			if _, err := d.PackBytes(ctx, packed, src, 0); err != nil {
				return err
			}
			return a.Send(ctx, packed, c.Rank(), 2)
		}, func() error {
			buf := make([]byte, n)
			if _, err := c.Recv(ctx, buf, a.Rank(), 2); err != nil {
				return err
			}
			_, err := d.UnpackBytes(ctx, dst, buf, 0)
			return err
		})
	})
	b.Run("host", func(b *testing.B) {
		run(b, func() error { return a.SendTyped(ctx, host[hbase:], count, st, c.Rank(), 3) },
			func() error { _, err := c.RecvTyped(ctx, hostDst[rbase:], count, rt, a.Rank(), 3); return err })
	})
}
