package bootstrap_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-hpc/weft/internal/bootstrap"
)

// Started without a launcher, a program is a singleton job of size 1; under
// fabrun, mpiexec.hydra or srun --mpi=pmi2 the same code sees every rank.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bs, err := bootstrap.Init(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer bs.Finalize()
	key := fmt.Sprintf("addr.%d", bs.Rank())
	if err := bs.Put(key, []byte{0, 1, 2, 0xff}); err != nil {
		fmt.Println(err)
		return
	}
	if err := bs.Fence(ctx); err != nil {
		fmt.Println(err)
		return
	}
	v, err := bs.Get(ctx, "addr.0")
	fmt.Println(bs.Kind(), bs.Size(), v, err)
	// Output: singleton 1 [0 1 2 255] <nil>
}
