package endpoint_test

import (
	"math"
	"testing"

	"github.com/weft-hpc/weft/endpoint"
)

// BenchmarkPartitioned sends 1 MiB computed in 8 pieces from one handle to
// another of this process, each round answered by a 1-byte message:
// "whole" computes everything, then sends one message; "partitioned"
// marks each piece ready as soon as it is computed, so the pieces travel
// while the next ones are computed; "partitioned-nowork" is the
// partitioned transfer alone.
func BenchmarkPartitioned(b *testing.B) {
	const n, parts = 1 << 20, 8
	compute := func(f []float64, salt int) {
		for i := range f {
			f[i] = math.Sqrt(float64(i+salt)) * 1.5
		}
	}
	for _, mode := range []string{"whole", "partitioned", "partitioned-nowork"} {
		b.Run(mode, func(b *testing.B) {
			x, y, ctx := benchPair(b, false)
			sf, rf := make([]float64, n/8), make([]float64, n/8)
			sbuf, rbuf := endpoint.AsBytes(sf), endpoint.AsBytes(rf)
			ack := make([]byte, 1)
			ps, err := x.PsendInit(sbuf, parts, 1, 2)
			if err != nil {
				b.Fatal(err)
			}
			pr, err := y.PrecvInit(rbuf, parts, 0, 2)
			if err != nil {
				b.Fatal(err)
			}
			rounds := b.N
			errc := make(chan error, 1)
			go func() { // y receives and acknowledges
				yack := make([]byte, 1)
				for i := 0; i < rounds; i++ {
					var err error
					if mode == "whole" {
						_, err = y.Recv(ctx, rbuf, 0, 1)
					} else if err = pr.Start(); err == nil {
						err = pr.Wait(ctx)
					}
					if err == nil {
						err = y.Send(ctx, yack, 0, 3)
					}
					if err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			per := len(sf) / parts
			b.SetBytes(n)
			b.ResetTimer()
			for i := 0; i < rounds; i++ {
				switch mode {
				case "whole":
					for p := 0; p < parts; p++ {
						compute(sf[p*per:(p+1)*per], i)
					}
					if err := x.Send(ctx, sbuf, 1, 1); err != nil {
						b.Fatal(err)
					}
				default:
					if err := ps.Start(); err != nil {
						b.Fatal(err)
					}
					for p := 0; p < parts; p++ {
						if mode == "partitioned" {
							compute(sf[p*per:(p+1)*per], i)
						}
						if err := ps.Pready(p); err != nil {
							b.Fatal(err)
						}
					}
					if err := ps.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := x.Recv(ctx, ack, 1, 3); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			ps.Free()
			pr.Free()
		})
	}
}
