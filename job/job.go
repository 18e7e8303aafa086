// Package job is a process's view of the parallel job it belongs to: its
// rank and size, which ranks share its node, and a put/fence/get exchange of
// bytes through the launcher, available before any fabric is up.
//
// Init detects the launcher from the environment: fabrun (weft's own),
// MPICH Hydra (PMI-1), Slurm (srun --mpi=pmi2, PMI-2), or none (a singleton
// job of size 1); WEFT_PMI=pmi1|pmi2|singleton overrides the detection.
// endpoint.Init calls it when given no job (endpoint.WithJob), and
// onesided.JobGroup builds a window group on it.
//
// Values are arbitrary bytes. Keys are short names of letters, digits and
// "_-.:/"; callers put their rank in the key (e.g. "ep.3"). A Job is safe
// for concurrent use.
package job

import (
	"context"

	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/bootstrap"
)

// Job is this process's connection to the job's launcher.
type Job interface {
	// Rank is this process's rank in [0, Size).
	Rank() int
	// Size is the number of ranks in the job.
	Size() int
	// LocalRank is this process's index among the ranks on its node.
	LocalRank() int
	// LocalSize is the number of ranks on this node.
	LocalSize() int
	// Put publishes value (any bytes) under key. Keys are global: callers
	// put their rank in the key. A rank may put a key only once (a second
	// Put fails with ErrInvalid); two ranks putting the same key is
	// undefined.
	Put(key string, value []byte) error
	// Fence is collective over all ranks: every Put made before it by any
	// rank is visible to Get after it.
	Fence(ctx context.Context) error
	// Get returns the value put under key by any rank before the last
	// Fence. It returns an error wrapping ErrNotFound when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Abort asks the launcher to kill the whole job with exit status code,
	// printing msg. It returns after the request is sent; the caller should
	// then exit. In a singleton it only logs.
	Abort(code int, msg string) error
	// Finalize ends the launcher session. Later calls fail with ErrClosed.
	Finalize() error
	// Kind names the launcher: "fabrun", "hydra", "slurm" or "singleton".
	Kind() string
}

// AppNum returns the index of j's program in an MPMD launch (MPI's
// MPI_APPNUM: 1 for the ranks of b in "fabrun -n 2 a : -n 4 b", and
// likewise under mpiexec.hydra), 0 in a job of one program or for a Job
// that does not say.
func AppNum(j Job) int {
	if a, ok := j.(interface{ AppNum() int }); ok {
		return a.AppNum()
	}
	return 0
}

// Errors returned by Job methods, wrapped with context (test with
// errors.Is). ErrInvalid and ErrClosed are the shared sentinels of package
// errs.
var (
	// ErrNotFound reports a Get of a key nobody put before the last Fence.
	ErrNotFound = bootstrap.ErrNotFound
	// ErrInvalid reports a bad key: empty, with a character outside the
	// allowed set, too long for the launcher, or put twice by this rank.
	ErrInvalid = errs.ErrInvalid
	// ErrClosed reports a call after Finalize.
	ErrClosed = errs.ErrClosed
)

// Init connects to the launcher named by the environment (see the package
// documentation) and returns this process's Job. ctx bounds the connection
// and the initial exchange. Call Finalize when done.
func Init(ctx context.Context) (Job, error) {
	b, err := bootstrap.Init(ctx)
	if err != nil {
		return nil, err
	}
	return b, nil
}
