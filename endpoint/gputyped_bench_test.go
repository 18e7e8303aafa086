package endpoint_test

import (
	"context"
	"fmt"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/gpu"
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
func BenchmarkDeviceTypedSend(b *testing.B) { benchDeviceSend(b, 1<<20) }

// BenchmarkDeviceTypedPingPong: a ping-pong of one eager typed message
// (1 KiB and 12 KiB of BenchmarkDeviceTypedSend's layout) between two
// endpoints of one process over libfabric shm; ns/op is one round trip.
// gpu: GPU memory on both sides, each message packed in place into a
// mapped segment buffer by one kernel and unpacked from the mapped bounce
// buffer by one kernel; gpu-copy, gpu-copyrecv, gpu-copyboth: the same,
// packed, unpacked or both through the device's staging buffer (a kernel
// and a copy each); staged: by hand (PackBytes, Send, Recv, UnpackBytes);
// host: the host typed messages of the same layouts.
func BenchmarkDeviceTypedPingPong(b *testing.B) {
	d, a, c, ctx := deviceBenchPair(b)
	st, rt := gpuLayouts(b)
	for _, size := range []int{1 << 10, 12 << 10} {
		count := size / int(st.Size())
		src, dst, host, hostDst, n := deviceBenchBufs(b, d, st, rt, count)
		pa, pc := make([]byte, n), make([]byte, n)
		// pp times b.N round trips: ping on this goroutine (a's side),
		// pong on another (c's).
		pp := func(b *testing.B, ping, pong func() error) {
			b.SetBytes(int64(2 * n))
			_, _, c0, m0 := endpoint.DevicePaths()
			sc0, sm0 := endpoint.DeviceSendPaths()
			defer func() {
				_, _, c1, m1 := endpoint.DevicePaths()
				sc1, sm1 := endpoint.DeviceSendPaths()
				b.Logf("%d round trips: sends copied %d mapped %d, receives copied %d mapped %d", b.N, sc1-sc0, sm1-sm0, c1-c0, m1-m0)
			}()
			done := make(chan error, 1)
			go func() {
				var err error
				for i := 0; i < b.N && err == nil; i++ {
					err = pong()
				}
				done <- err
			}()
			for i := 0; i < b.N; i++ {
				if err := ping(); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		gpuPing := func() error {
			if err := a.SendDevice(ctx, src, c.Rank(), 1); err != nil {
				return err
			}
			_, err := a.RecvDevice(ctx, src, c.Rank(), 1)
			return err
		}
		gpuPong := func() error {
			if _, err := c.RecvDevice(ctx, dst, a.Rank(), 1); err != nil {
				return err
			}
			return c.SendDevice(ctx, dst, a.Rank(), 1)
		}
		name := fmt.Sprintf("%dk/", size>>10)
		b.Run(name+"gpu", func(b *testing.B) { pp(b, gpuPing, gpuPong) })
		// The same with the ping's receive posted before its send, so
		// that the pong never arrives unexpected.
		b.Run(name+"gpu-posted", func(b *testing.B) {
			pp(b, func() error {
				r, err := a.IrecvDevice(src, c.Rank(), 1)
				if err != nil {
					return err
				}
				if err := a.SendDevice(ctx, src, c.Rank(), 1); err != nil {
					return err
				}
				_, err = r.Wait(ctx)
				return err
			}, gpuPong)
		})
		for _, v := range []struct {
			name       string
			send, recv bool
		}{{"gpu-copy", true, false}, {"gpu-copyrecv", false, true}, {"gpu-copyboth", true, true}} {
			b.Run(name+v.name, func(b *testing.B) {
				endpoint.ForceDeviceSendCopy(v.send)
				endpoint.ForceDeviceRecvCopy(v.recv)
				defer endpoint.ForceDeviceSendCopy(false)
				defer endpoint.ForceDeviceRecvCopy(false)
				pp(b, gpuPing, gpuPong)
			})
		}
		b.Run(name+"staged", func(b *testing.B) {
			pp(b, func() error {
				if _, err := d.PackBytes(ctx, pa, src, 0); err != nil {
					return err
				}
				if err := a.Send(ctx, pa, c.Rank(), 2); err != nil {
					return err
				}
				if _, err := a.Recv(ctx, pa, c.Rank(), 2); err != nil {
					return err
				}
				_, err := d.UnpackBytes(ctx, src, pa, 0)
				return err
			}, func() error {
				if _, err := c.Recv(ctx, pc, a.Rank(), 2); err != nil {
					return err
				}
				if _, err := d.UnpackBytes(ctx, dst, pc, 0); err != nil {
					return err
				}
				if _, err := d.PackBytes(ctx, pc, dst, 0); err != nil {
					return err
				}
				return c.Send(ctx, pc, a.Rank(), 2)
			})
		})
		b.Run(name+"host", func(b *testing.B) {
			pp(b, func() error {
				if err := a.SendTyped(ctx, host, count, st, c.Rank(), 3); err != nil {
					return err
				}
				_, err := a.RecvTyped(ctx, host, count, st, c.Rank(), 3)
				return err
			}, func() error {
				if _, err := c.RecvTyped(ctx, hostDst, count, rt, a.Rank(), 3); err != nil {
					return err
				}
				return c.SendTyped(ctx, hostDst, count, rt, a.Rank(), 3)
			})
		})
	}
}

// deviceBenchPair opens CUDA device 0 where there is one, else OpenCL
// device 0 (closed when b ends, outside its timer), and two endpoints of
// one process over libfabric shm.
func deviceBenchPair(b *testing.B) (*gpu.Device, *endpoint.Comm, *endpoint.Comm, context.Context) {
	d, err := openCUDA()
	if err != nil {
		d = openCLDevice(b)
	}
	b.Cleanup(func() { b.StopTimer(); d.Close() })
	b.Logf("device %s", d)
	b.Setenv(endpoint.EnvNodeTransport, "fabric")
	a, c, ctx := benchPair(b, false)
	return d, a, c, ctx
}

// deviceBenchBufs returns count elements of st in GPU memory (src),
// room for count of rt there (dst), the same layouts in host memory
// (from their displacement 0) and the packed size n.
func deviceBenchBufs(b *testing.B, d *gpu.Device, st, rt *ddt.Type, count int) (src, dst gpu.Typed, host, hostDst []byte, n int) {
	src, stream := gpuSource(b, d, st, count, 1)
	dst, _ = gpuDest(b, d, rt, count)
	hn, hbase := ddttest.Layout(st, count)
	rn, rbase := ddttest.Layout(rt, count)
	return src, dst, make([]byte, hn)[hbase:], make([]byte, rn)[rbase:], len(stream)
}

func benchDeviceSend(b *testing.B, size int) {
	d, a, c, ctx := deviceBenchPair(b)
	st, rt := gpuLayouts(b)
	count := size / int(st.Size())
	src, dst, host, hostDst, n := deviceBenchBufs(b, d, st, rt, count)
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
		run(b, func() error { return a.SendTyped(ctx, host, count, st, c.Rank(), 3) },
			func() error { _, err := c.RecvTyped(ctx, hostDst, count, rt, a.Rank(), 3); return err })
	})
}
