package job_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/weft-hpc/weft/job"
)

// Every rank publishes a value under a key holding its rank, fences, and
// reads every other rank's value. Outside a launcher the job is a singleton.
func Example() {
	ctx := context.Background()
	j, err := job.Init(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer j.Finalize()
	if err := j.Put("greeting."+strconv.Itoa(j.Rank()), []byte("hi")); err != nil {
		fmt.Println(err)
		return
	}
	if err := j.Fence(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for r := range j.Size() {
		v, err := j.Get(ctx, "greeting."+strconv.Itoa(r))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("rank %d says %s\n", r, v)
	}
	// Output: rank 0 says hi
}

// A program of an MPMD job ("fabrun -n 2 solver : -n 1 monitor") learns
// which of the programs it is; a job of one program is program 0.
func ExampleAppNum() {
	j, err := job.Init(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer j.Finalize()
	fmt.Printf("rank %d runs program %d\n", j.Rank(), job.AppNum(j))
	// Output: rank 0 runs program 0
}
