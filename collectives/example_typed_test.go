package collectives_test

import (
	"context"
	"fmt"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// Three ranks each hold a vector of 4 values and gather them at rank 0 as
// the columns of a 4×3 row-major matrix: the receive type is a column (a
// ddt.Vector with a stride of one row) resized to one float64, so that
// element k of it is column k. (bytesOf, as in the tests, views a
// []float64 as its bytes with unsafe.Slice.)
func ExampleGatherTyped() {
	onEndpoints(3, func(ctx context.Context, ep *endpoint.Comm) string {
		c, err := collectives.New(ctx, ep)
		if err != nil {
			return err.Error()
		}
		defer c.Free()
		const rows, cols = 4, 3
		r := c.Rank()
		vec := make([]float64, rows)
		for i := range vec {
			vec[i] = float64(10*r + i)
		}
		col, err := ddt.Vector(rows, 1, cols, ddt.Float64)
		if err == nil {
			col, err = ddt.Resized(col, 0, 8)
		}
		if err == nil {
			err = col.Commit()
		}
		if err != nil {
			return err.Error()
		}
		m := make([]float64, rows*cols)
		err = collectives.GatherTyped(ctx, c, bytesOf(vec), rows, ddt.Float64, bytesOf(m), 1, col, 0)
		if err != nil {
			return err.Error()
		}
		if r != 0 {
			return fmt.Sprintf("rank %d sent %v", r, vec)
		}
		s := "rank 0:"
		for i := 0; i < rows; i++ {
			s += fmt.Sprintf(" %v", m[i*cols:(i+1)*cols])
		}
		return s
	})
	// Output:
	// rank 0: [0 10 20] [1 11 21] [2 12 22] [3 13 23]
	// rank 1 sent [10 11 12 13]
	// rank 2 sent [20 21 22 23]
}

// Every rank sums column 1 of its 3×3 row-major matrix with the other
// ranks', in place: the column is a ddt.Vector of float64 (a datatype
// built of the element type alone, as a reduction requires), and the
// other entries are left alone.
func ExampleAllreduceTyped() {
	onEndpoints(2, func(ctx context.Context, ep *endpoint.Comm) string {
		c, err := collectives.New(ctx, ep)
		if err != nil {
			return err.Error()
		}
		defer c.Free()
		r := c.Rank()
		m := make([]float64, 9)
		for i := range m {
			m[i] = float64(100*(r+1) + i)
		}
		col, err := ddt.Vector(3, 1, 3, ddt.Float64)
		if err == nil {
			err = col.Commit()
		}
		if err != nil {
			return err.Error()
		}
		if err := collectives.AllreduceTyped(ctx, c, nil, m[1:], 1, col, collectives.Sum[float64]()); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("rank %d: %v %v %v", r, m[0:3], m[3:6], m[6:9])
	})
	// Output:
	// rank 0: [100 302 102] [103 308 105] [106 314 108]
	// rank 1: [200 302 202] [203 308 205] [206 314 208]
}
