package am

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/eptest"
)

// TestAggregationBatches: with aggregation, 300 small messages sent
// without polling wait in batches (nothing has left before Flush) and
// arrive as a few batch messages (each record 20 bytes, batches of 1 KiB:
// 6 batches, one sent each time a record no longer fits, the last by
// Flush), handled in order; a larger message is not batched and flushes
// the batch before it.
func TestAggregationBatches(t *testing.T) {
	ctx := eptest.Ctx(t, 30*time.Second)
	eps, err := eptest.Singleton(t).Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range eps {
			c.Free()
		}
	}()
	eptest.First(t, ctx, eptest.Each(ctx, 2, func(ctx context.Context, i int) error {
		e, err := Open(ctx, eps[i], WithAggregation(1024))
		if err != nil {
			return err
		}
		defer e.Close(ctx)
		var got []int
		e.Register(1, func(ctx context.Context, m *Msg) error {
			got = append(got, int(m.Header()[0])|int(m.Header()[1])<<8)
			return nil
		})
		const n = 300
		if i == 0 {
			for k := range n - 1 {
				if err := e.Send(ctx, 1, 1, []byte{byte(k), byte(k >> 8), 0, 0, 0, 0, 0, 0}, nil); err != nil {
					return err
				}
			}
			if e.agg.pending.Load() == 0 || len(e.agg.bufs[1]) == 0 {
				return fmt.Errorf("nothing waits in a batch after %d small sends", n-1)
			}
			// Too large to batch: the batch leaves first.
			last := n - 1
			if err := e.Send(ctx, 1, 1, []byte{byte(last), byte(last >> 8)}, make([]byte, 600)); err != nil {
				return err
			}
			if err := e.Flush(); err != nil {
				return err
			}
		}
		if err := e.Quiesce(ctx); err != nil {
			return err
		}
		if i == 1 {
			if len(got) != n {
				return fmt.Errorf("%d messages handled, want %d", len(got), n)
			}
			for k, v := range got {
				if v != k {
					return fmt.Errorf("message %d handled in place %d", v, k)
				}
			}
			if want := (n - 1) * 20 / 1024; e.batchesIn < want || e.batchesIn > want+1 {
				return fmt.Errorf("%d batches received, want %d or %d", e.batchesIn, want, want+1)
			}
		}
		return nil
	}))
}
