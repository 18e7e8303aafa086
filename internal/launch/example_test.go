package launch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/weft-hpc/weft/internal/launch"
)

// Three local ranks; rank 1 fails, so the others are killed and the job's
// error names it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := launch.Run(ctx, launch.Config{
		NP:        3,
		TagOutput: true,
		Stdout:    os.Stdout,
		Argv:      []string{"sh", "-c", `[ "$PMI_RANK" = 1 ] && { echo failing; exit 3; }; sleep 30`},
	})
	var ee *launch.ExitError
	if errors.As(err, &ee) {
		fmt.Println(ee, "-> exit status", ee.ExitCode())
	}
	// Output:
	// [1] failing
	// rank 1 exited with status 3 -> exit status 3
}
