package collectives_test

import (
	"context"
	"fmt"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// Three ranks own 1, 2 and 1 of the 4 columns of a 3×4 row-major matrix
// and gather them into rank 0's matrix: the receive type is a column
// resized to one float64, so that element k is column k and rank r's
// displacement is its first column. Each rank sends its columns as one
// contiguous run of float64, column after column.
func ExampleGathervTyped() {
	onEndpoints(3, func(ctx context.Context, ep *endpoint.Comm) string {
		c, err := collectives.New(ctx, ep)
		if err != nil {
			return err.Error()
		}
		defer c.Free()
		const rows, cols = 3, 4
		counts, displs := []int{1, 2, 1}, []int{0, 1, 3}
		r := c.Rank()
		mine := make([]float64, rows*counts[r]) // column-major: my columns one after the other
		for k := 0; k < counts[r]; k++ {
			for i := 0; i < rows; i++ {
				mine[k*rows+i] = float64(10*(displs[r]+k) + i)
			}
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
		var m []float64
		if r == 0 {
			m = make([]float64, rows*cols)
		}
		err = collectives.GathervTyped(ctx, c, bytesOf(mine), len(mine), ddt.Float64, bytesOf(m), counts, displs, col, 0)
		if err != nil {
			return err.Error()
		}
		if r != 0 {
			return fmt.Sprintf("rank %d sent %v", r, mine)
		}
		s := "rank 0:"
		for i := 0; i < rows; i++ {
			s += fmt.Sprintf(" %v", m[i*cols:(i+1)*cols])
		}
		return s
	})
	// Output:
	// rank 0: [0 10 20 30] [1 11 21 31] [2 12 22 32]
	// rank 1 sent [10 11 12 20 21 22]
	// rank 2 sent [30 31 32]
}

// Every rank holds a 2×2 row-major matrix and computes the running sum,
// over ranks 0..r, of its diagonal: the diagonal is a ddt.Vector of 2
// float64 with a stride of 3, and the off-diagonal entries are left
// alone.
func ExampleScanTyped() {
	onEndpoints(3, func(ctx context.Context, ep *endpoint.Comm) string {
		c, err := collectives.New(ctx, ep)
		if err != nil {
			return err.Error()
		}
		defer c.Free()
		r := c.Rank()
		m := []float64{float64(r + 1), -1, -1, float64(10 * (r + 1))}
		diag, err := ddt.Vector(2, 1, 3, ddt.Float64)
		if err == nil {
			err = diag.Commit()
		}
		if err != nil {
			return err.Error()
		}
		if err := collectives.ScanTyped(ctx, c, nil, m, 1, diag, collectives.Sum[float64]()); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("rank %d: %v", r, m)
	})
	// Output:
	// rank 0: [1 -1 -1 10]
	// rank 1: [3 -1 -1 30]
	// rank 2: [6 -1 -1 60]
}
