// Command coupled is a toy of the coupled models climate codes run: an
// "atmosphere" and an "ocean", two programs of one MPMD job, each on its
// own ranks with its own communicator, exchanging their fields across an
// intercommunicator every step.
//
//	fabrun -n 2 coupled : -n 3 coupled
//
// The first program (job.AppNum 0) is the atmosphere, the second the
// ocean. Both hold a field on the same -points points, each cut into
// equal blocks among its own ranks, so a block of one side overlaps one
// or more blocks of the other. Each program splits the world by program
// number (Comm.Split), and the two are joined by Comm.IntercommCreate,
// through which a rank names the other model's ranks by their ranks in
// that model. Every step
//
//  1. the atmosphere sends its temperatures to the ocean ranks whose
//     blocks overlap its own (Isend on the intercommunicator);
//  2. the ocean relaxes its temperatures towards the atmosphere's,
//     s += 0.1·(a − s), and sends them back the same way;
//  3. the atmosphere relaxes towards the ocean's, a += 0.2·(s − a).
//
// After -steps steps each model gathers its field on its rank 0
// (collectives.Gatherv on its own communicator), which repeats the run
// serially and checks that every value is the same. Each rank prints
//
//	rank R of N (MODEL rank M of K): points A..B, coupled ok
//
// and each model's rank 0 adds
//
//	coupled: MODEL, K ranks, P points, S steps, max |diff| 0 vs serial
//
// Exit status: 0 when both models match the serial run, 1 on any error
// or mismatch, 2 for bad flags or a job that is not of two programs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/job"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "coupled: %v\n", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "coupled:", err)
		os.Exit(1)
	}
}

// usageError is a bad flag or job shape.
type usageError struct{ error }

// The models, by program number.
var models = [2]string{"atmosphere", "ocean"}

// Message tags on the intercommunicator.
const (
	tagAtm = 1 // atmosphere → ocean
	tagOcn = 2 // ocean → atmosphere
)

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("coupled", flag.ContinueOnError)
	points := fs.Int("points", 1000, "points of each model's field")
	steps := fs.Int("steps", 50, "coupling steps")
	timeout := fs.Duration("timeout", 60*time.Second, "limit for the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *points < 1 || *steps < 0 || *timeout <= 0 {
		return usageError{fmt.Errorf("-points %d, -steps %d, -timeout %v: want points ≥ 1, steps ≥ 0, timeout > 0", *points, *steps, *timeout)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	world := w.Comm()
	app := job.AppNum(w.Job())

	// Where the other model's leader is: the lowest world rank of the
	// other program.
	apps, err := world.Allgather(ctx, []byte{byte(app)})
	if err != nil {
		return err
	}
	first := [2]int{-1, -1}
	for r, b := range apps {
		if a := int(b[0]); a > 1 {
			return usageError{fmt.Errorf("rank %d is of program %d: run two programs, fabrun -n A coupled : -n O coupled", r, a)}
		} else if first[a] < 0 {
			first[a] = r
		}
	}
	if first[0] < 0 || first[1] < 0 {
		return usageError{errors.New("a job of one program: run two, fabrun -n A coupled : -n O coupled")}
	}
	local, err := world.Split(ctx, app, world.Rank())
	if err != nil {
		return err
	}
	defer local.Free()
	ic, err := local.IntercommCreate(ctx, 0, world, first[1-app], 1)
	if err != nil {
		return err
	}
	defer ic.Free()

	n, me := local.Size(), local.Rank()
	lo, hi := block(*points, n, me)
	field := initial(app, *points)[lo:hi]
	other := make([]float64, hi-lo) // the other model's values on this block
	for range *steps {
		if app == 0 {
			if err := exchange(ctx, ic, *points, lo, field, nil, tagAtm, 0); err != nil {
				return err
			}
			if err := exchange(ctx, ic, *points, lo, nil, other, 0, tagOcn); err != nil {
				return err
			}
			relax(field, other, 0.2)
			continue
		}
		if err := exchange(ctx, ic, *points, lo, nil, other, 0, tagAtm); err != nil {
			return err
		}
		relax(field, other, 0.1)
		if err := exchange(ctx, ic, *points, lo, field, nil, tagOcn, 0); err != nil {
			return err
		}
	}

	// The check: the model's field on its rank 0, against a serial run of
	// both models.
	coll, err := collectives.New(ctx, local)
	if err != nil {
		return err
	}
	defer coll.Free()
	counts, displs := make([]int, n), make([]int, n)
	for r := range n {
		a, b := block(*points, n, r)
		counts[r], displs[r] = b-a, a
	}
	var all []float64
	if me == 0 {
		all = make([]float64, *points)
	}
	if err := collectives.Gatherv(ctx, coll, field, all, counts, displs, 0); err != nil {
		return err
	}
	fmt.Fprintf(out, "rank %d of %d (%s rank %d of %d): points %d..%d, coupled ok\n", world.Rank(), world.Size(), models[app], me, n, lo, hi-1)
	if me != 0 {
		return nil
	}
	ref := serial(*points, *steps)[app]
	diff := 0.0
	for i := range all {
		diff = math.Max(diff, math.Abs(all[i]-ref[i]))
	}
	fmt.Fprintf(out, "coupled: %s, %d ranks, %d points, %d steps, max |diff| %v vs serial\n", models[app], n, *points, *steps, diff)
	if diff != 0 {
		return fmt.Errorf("%s differs from the serial run by %v", models[app], diff)
	}
	return nil
}

// block is rank r's share [lo, hi) of n points cut among p ranks.
func block(n, p, r int) (lo, hi int) { return r * n / p, (r + 1) * n / p }

// initial is model app's field at the start.
func initial(app, n int) []float64 {
	f := make([]float64, n)
	for i := range f {
		if app == 0 {
			f[i] = 250 + float64(i%37)
		} else {
			f[i] = 290 - float64(i%23)
		}
	}
	return f
}

// relax moves f towards g by the fraction k.
func relax(f, g []float64, k float64) {
	for i := range f {
		f[i] += k * (g[i] - f[i])
	}
}

// exchange sends this rank's block (send, starting at point lo, when not
// nil) to every remote rank whose block overlaps it, with sendTag, or
// receives those ranks' parts of it into recv with recvTag; the two
// sides' blocks cut the same points among their own ranks.
func exchange(ctx context.Context, ic *endpoint.Comm, points, lo int, send, recv []float64, sendTag, recvTag int) error {
	buf := send
	if buf == nil {
		buf = recv
	}
	hi, rn := lo+len(buf), ic.RemoteSize()
	var reqs []*endpoint.Request
	for r := range rn {
		a, b := block(points, rn, r)
		a, b = max(a, lo), min(b, hi)
		if a >= b {
			continue
		}
		part := endpoint.AsBytes(buf[a-lo : b-lo])
		var req *endpoint.Request
		var err error
		if send != nil {
			req, err = ic.Isend(part, r, sendTag)
		} else {
			req, err = ic.Irecv(part, r, recvTag)
		}
		if err != nil {
			return err
		}
		reqs = append(reqs, req)
	}
	return endpoint.WaitAll(ctx, reqs...)
}

// serial runs both models on one field each and returns them.
func serial(points, steps int) [2][]float64 {
	a, s := initial(0, points), initial(1, points)
	for range steps {
		relax(s, a, 0.1)
		relax(a, s, 0.2)
	}
	return [2][]float64{a, s}
}
