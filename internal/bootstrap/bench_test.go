package bootstrap

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/weft-hpc/weft/internal/pmi"
)

// BenchmarkExchange measures one all-to-all address exchange as weft does
// it at start-up: every rank Puts a 64-byte value (a typical libfabric
// name), Fences, and Gets every rank's value. n ranks run as goroutines
// against fabrun's PMI-1 server over loopback TCP; one op is one exchange.
func BenchmarkExchange(b *testing.B) {
	for _, n := range []int{4, 16} {
		b.Run("ranks="+strconv.Itoa(n), func(b *testing.B) {
			secret, _ := pmi.NewSecret()
			srv, err := pmi.NewServer(pmi.ServerConfig{Size: n, Secret: secret, ProcessMapping: fmt.Sprintf("(vector,(0,1,%d))", n)})
			if err != nil {
				b.Fatal(err)
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			go srv.Serve(ctx, l)
			defer srv.Close()
			bs := make([]Bootstrap, n)
			var wg sync.WaitGroup
			for r := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					env := map[string]string{"PMI_PORT": l.Addr().String(), "PMI_ID": strconv.Itoa(r), "WEFT_PMI_SECRET": secret}
					var err error
					if bs[r], err = initFrom(ctx, envFunc(env)); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			if b.Failed() {
				return
			}
			val := make([]byte, 64)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for r := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := bs[r].Put(fmt.Sprintf("ep.%d.%d", i, r), val); err != nil {
							b.Error(err)
							return
						}
						if err := bs[r].Fence(ctx); err != nil {
							b.Error(err)
							return
						}
						for p := range n {
							if _, err := bs[r].Get(ctx, fmt.Sprintf("ep.%d.%d", i, p)); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			for _, x := range bs {
				x.Finalize()
			}
		})
	}
}
