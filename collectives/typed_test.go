package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/eptest"
)

// committed returns a function that commits a type made without error,
// or fails t: committed(t)(ddt.Vector(...)).
func committed(t testing.TB) func(*ddt.Type, error) *ddt.Type {
	return func(ty *ddt.Type, err error) *ddt.Type {
		t.Helper()
		if err == nil {
			err = ty.Commit()
		}
		if err != nil {
			t.Fatal(err)
		}
		return ty
	}
}

// TestBcastTyped: a column of a row-major matrix (ddt.Vector) broadcast
// into the same column elsewhere, leaving the other entries alone; the
// root's column received as a contiguous vector on other ranks (types
// differ, packed data agree); each algorithm; a layout outside its buffer
// is an error on the rank that has it, and the others do not hang.
func TestBcastTyped(t *testing.T) {
	const rows, cols, col = 37, 5, 3
	column := committed(t)(ddt.Vector(rows, 1, cols, ddt.Float64))
	vec := committed(t)(ddt.Contiguous(rows, ddt.Float64))
	for _, p := range []int{1, 3, 4} {
		for _, alg := range []C.Algorithm{C.Binomial, C.ScatterAllgather, C.Linear} {
			t.Run(fmt.Sprintf("p%d/%s", p, alg), func(t *testing.T) {
				runHandles(t, eptest.Ctx(t, 30*time.Second), handles(t, p), []C.Option{C.WithAlgorithm(C.CollBcast, alg)}, func(ctx context.Context, c *C.Coll) error {
					root := p - 1
					m := make([]float64, rows*cols)
					for i := range m {
						m[i] = float64(-1 - c.Rank())
					}
					if c.Rank() == root {
						for r := 0; r < rows; r++ {
							m[r*cols+col] = float64(r*10 + 7)
						}
					}
					if err := C.BcastTyped(ctx, c, bytesOf(m[col:]), 1, column, root); err != nil {
						return err
					}
					for r := 0; r < rows; r++ {
						for k := 0; k < cols; k++ {
							want := float64(-1 - c.Rank())
							if k == col {
								want = float64(r*10 + 7)
							}
							if m[r*cols+k] != want {
								return fmt.Errorf("rank %d: m[%d][%d] = %g, want %g", c.Rank(), r, k, m[r*cols+k], want)
							}
						}
					}
					// the root sends its column, the others receive a vector
					v := make([]float64, rows)
					ty, buf := vec, bytesOf(v)
					if c.Rank() == root {
						ty, buf = column, bytesOf(m[col:])
					}
					if err := C.BcastTyped(ctx, c, buf, 1, ty, root); err != nil {
						return err
					}
					if c.Rank() != root {
						for r := range v {
							if v[r] != float64(r*10+7) {
								return fmt.Errorf("rank %d: v[%d] = %g", c.Rank(), r, v[r])
							}
						}
					}
					return nil
				})
			})
		}
	}
	errs, took := each(t, eptest.Ctx(t, 30*time.Second), handles(t, 3), nil, func(ctx context.Context, c *C.Coll) error {
		m := make([]float64, rows*cols)
		buf := bytesOf(m[col:])
		if c.Rank() == 1 {
			buf = buf[:8*cols*(rows-2)] // too short for the column
		}
		return C.BcastTyped(ctx, c, buf, 1, column, 0)
	})
	if !errors.Is(errs[1], C.ErrOutOfRange) {
		t.Errorf("rank 1, column outside its buffer: %v", errs[1])
	}
	for i, d := range took {
		if d > quick {
			t.Errorf("handle %d took %v", i, d)
		}
	}
}

func bytesOf(s []float64) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 8*len(s))
}
