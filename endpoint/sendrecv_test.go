package endpoint_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// TestSendrecvReplace: a ring shift of a strided column in place, eager
// and rendezvous sized, over 4 handles: each rank's column holds its left
// neighbour's values after the call and the rest of its buffer is
// untouched; with ProcNull on both sides nothing changes.
func TestSendrecvReplace(t *testing.T) {
	cartHandles(t, 4, func(ctx context.Context, c *endpoint.Comm) error {
		me, p := c.Rank(), c.Size()
		right, left := (me+1)%p, (me+p-1)%p
		for _, rows := range []int{16, 1 << 15} {
			col, err := ddt.Vector(rows, 1, 3, ddt.Float64)
			if err == nil {
				err = col.Commit()
			}
			if err != nil {
				return err
			}
			a := make([]float64, 3*rows)
			for i := range a {
				a[i] = float64(-i)
			}
			for r := range rows {
				a[3*r+1] = float64(1000*me + r)
			}
			buf := endpoint.AsBytes(a)
			st, err := c.SendrecvReplace(ctx, buf[8:], 1, col, right, 5, left, 5)
			if err != nil || st.Source != left || st.Count != 8*rows {
				return fmt.Errorf("%d rows: %+v %v", rows, st, err)
			}
			for i, x := range a {
				want := float64(-i)
				if i%3 == 1 {
					want = float64(1000*left + i/3)
				}
				if x != want {
					return fmt.Errorf("%d rows: element %d = %v, want %v", rows, i, x, want)
				}
			}
			if _, err := c.SendrecvReplace(ctx, buf[8:], 1, col, endpoint.ProcNull, 5, endpoint.ProcNull, 5); err != nil {
				return err
			}
			if a[1] != float64(1000*left) {
				return fmt.Errorf("%d rows: ProcNull both ways changed the column", rows)
			}
		}
		return nil
	})
}
