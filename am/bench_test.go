package am_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/am"
)

// benchPair runs body on two engines over two endpoint handles of this
// process, each driven by its own goroutine; rank 0 times.
func benchPair(b *testing.B, body func(ctx context.Context, e *am.Engine, b *testing.B) error) {
	eps := handles(b, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = withEngine(ctx, c, nil, func(ctx context.Context, e *am.Engine) error {
				if err := e.Quiesce(ctx); err != nil {
					return err
				}
				if i == 0 {
					b.ResetTimer()
				}
				return body(ctx, e, b)
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCall: a call with an 8-byte header whose handler replies with
// 8 bytes, between two endpoint handles of one process.
func BenchmarkCall(b *testing.B) {
	benchPair(b, func(ctx context.Context, e *am.Engine, b *testing.B) error {
		var served int
		e.Register(1, func(ctx context.Context, m *am.Msg) error { served++; return m.Reply(m.Header()) })
		hdr, reply := make([]byte, 8), make([]byte, 0, 8)
		var err error
		if e.Rank() == 1 {
			// A handler may run nested in another's reply, so count calls
			// served, not polls.
			for served < b.N {
				if _, err := e.Poll(ctx); err != nil {
					return err
				}
			}
			return nil
		}
		for range b.N {
			if reply, err = e.Call(ctx, 1, 1, hdr, nil, reply); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkSend: 8-byte active messages in windows of 64, each window
// acknowledged, between two endpoint handles of one process; ns per
// message.
func BenchmarkSend(b *testing.B) {
	const window = 64
	benchPair(b, func(ctx context.Context, e *am.Engine, b *testing.B) error {
		var got int
		e.Register(1, func(ctx context.Context, m *am.Msg) error { got++; return nil })
		hdr := make([]byte, 8)
		await := func(n int) error {
			for got < n {
				if _, err := e.Poll(ctx); err != nil {
					return err
				}
			}
			return nil
		}
		wins := (b.N + window - 1) / window
		for w := range wins {
			if e.Rank() == 0 {
				for range window {
					if err := e.Send(ctx, 1, 1, hdr, nil); err != nil {
						return err
					}
				}
				if err := await(w + 1); err != nil {
					return err
				}
			} else {
				if err := await((w + 1) * window); err != nil {
					return err
				}
				if err := e.Send(ctx, 0, 1, nil, nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
