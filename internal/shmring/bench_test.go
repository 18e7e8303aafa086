package shmring

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// spin polls f until it reports true, yielding now and then so a shared
// machine with fewer cores than spinners still makes progress.
func spin(f func() bool) {
	for i := 1; !f(); i++ {
		if i%1024 == 0 {
			runtime.Gosched()
		}
	}
}

// BenchmarkPingPongSizes bounces messages of several sizes between two
// goroutines through two rings of 512 cells; ns/half-rt is the one-way
// latency, the inline path's cost with every cell crossing cores.
func BenchmarkPingPongSizes(b *testing.B) {
	for _, n := range []int{8, 64, 128, 512, 2048} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { pingPong(b, 512, n) })
	}
}

// BenchmarkPingPong8 bounces an 8-byte message between two goroutines
// through two rings; ns/half-rt is the one-way latency.
func BenchmarkPingPong8(b *testing.B) { pingPong(b, 256, 8) }

// pingPong bounces n-byte messages between two goroutines through two
// rings of the given cells.
func pingPong(b *testing.B, cells, n int) {
	_, ping, pingRx := newRing(b, cells, DefaultMaxInline)
	_, pong, pongRx := newRing(b, cells, DefaultMaxInline)
	msg := make([]byte, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, n)
		for i := 0; i < b.N; i++ {
			var u uint64
			spin(func() bool { var ok bool; u, _, ok, _ = pingRx.TryRecv(buf); return ok })
			spin(func() bool { ok, _ := pong.TrySend(u, buf); return ok })
		}
	}()
	buf := make([]byte, n)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		spin(func() bool { ok, _ := ping.TrySend(uint64(i), msg); return ok })
		spin(func() bool { _, _, ok, _ := pongRx.TryRecv(buf); return ok })
	}
	el := time.Since(start)
	b.StopTimer()
	<-done
	b.ReportMetric(float64(el.Nanoseconds())/float64(2*b.N), "ns/half-rt")
	b.ReportMetric(0, "ns/op")
}

// benchRate streams 8-byte messages one way; the ring (window) is 256
// cells; batch > 1 sends with TrySendv.
func benchRate(b *testing.B, batch int) {
	_, pr, co := newRing(b, 256, DefaultMaxInline)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 8)
		for got := 0; got < b.N; {
			spin(func() bool { _, _, ok, _ := co.TryRecv(buf); return ok })
			got++
		}
	}()
	msg := make([]byte, 8)
	users := make([]uint64, batch)
	payloads := make([][]byte, batch)
	for i := range payloads {
		payloads[i] = msg
	}
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		if batch == 1 {
			spin(func() bool { ok, _ := pr.TrySend(uint64(sent), msg); return ok })
			sent++
			continue
		}
		m := min(batch, b.N-sent)
		spin(func() bool { n, _ := pr.TrySendv(users[:m], payloads[:m]); sent += n; m -= n; return m == 0 })
	}
	<-done
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
}

// BenchmarkRate8 is the one-way message rate of 8-byte messages.
func BenchmarkRate8(b *testing.B) { benchRate(b, 1) }

// BenchmarkRate8Batch16 is the same with batches of 16 published at once.
func BenchmarkRate8Batch16(b *testing.B) { benchRate(b, 16) }

// BenchmarkPingPong8OneGoroutine drives both ends of both rings from one
// goroutine, as fabric's BenchmarkBatchPingPong8 drives both endpoints: it
// measures the software path without cache lines crossing cores.
func BenchmarkPingPong8OneGoroutine(b *testing.B) {
	_, ping, pingRx := newRing(b, 256, DefaultMaxInline)
	_, pong, pongRx := newRing(b, 256, DefaultMaxInline)
	msg, buf := make([]byte, 8), make([]byte, 8)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if ok, _ := ping.TrySend(uint64(i), msg); !ok {
			b.Fatal("ping ring full")
		}
		u, _, ok, _ := pingRx.TryRecv(buf)
		if !ok {
			b.Fatal("no ping")
		}
		if ok, _ := pong.TrySend(u, buf); !ok {
			b.Fatal("pong ring full")
		}
		if _, _, ok, _ := pongRx.TryRecv(buf); !ok {
			b.Fatal("no pong")
		}
	}
	el := time.Since(start)
	b.ReportMetric(float64(el.Nanoseconds())/float64(2*b.N), "ns/half-rt")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSendRecvSizesOneGoroutine sends and receives messages of
// several sizes through one ring from one goroutine: the software cost of
// the inline path, without cache lines crossing cores.
func BenchmarkSendRecvSizesOneGoroutine(b *testing.B) {
	for _, n := range []int{8, 128, 512, 2048} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			_, pr, co := newRing(b, 512, DefaultMaxInline)
			msg, buf := make([]byte, n), make([]byte, n)
			for i := 0; i < b.N; i++ {
				if ok, _ := pr.TrySend(uint64(i), msg); !ok {
					b.Fatal("ring full")
				}
				if _, _, ok, _ := co.TryRecv(buf); !ok {
					b.Fatal("no message")
				}
			}
		})
	}
}
