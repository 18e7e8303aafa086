package main

// The collectives schemes: the same transpose through package
// collectives' overlapped all-to-all (TiledAlltoall) and its plain
// Alltoall, and -tunecheck, which compares the guided tuner with an
// exhaustive sweep on this workload.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/internal/fft"
	"github.com/weft-hpc/weft/onesided"
)

// coll returns the job's collectives handle, made on first use.
func (j *job) coll(ctx context.Context) (*collectives.Coll, error) {
	if j.cl != nil {
		return j.cl, nil
	}
	cl, err := collectives.New(ctx, j.c)
	j.cl = cl
	return cl, err
}

// tiledFuncs are the overlapped transpose's functions: compute transforms
// a copy of each row of the tile (out of place, so that the tuner may
// repeat a tile) and writes its column blocks into out; consume files
// rank q's rows into result[q].
func (j *job) tiledFuncs() (compute, packOnly collectives.TileCompute[complex128], consume collectives.TileConsume[complex128]) {
	row := make([]complex128, j.L)
	compute = func(t collectives.Tile, out [][]complex128) error {
		for i := range t.Count {
			copy(row, j.data[t.First+i])
			for range *work {
				fft.Forward(row, j.twiddles)
			}
			for q := range out {
				copy(out[q][i*j.C:(i+1)*j.C], row[q*j.C:])
			}
		}
		return nil
	}
	packOnly = func(t collectives.Tile, out [][]complex128) error {
		for i := range t.Count {
			for q := range out {
				copy(out[q][i*j.C:(i+1)*j.C], j.data[t.First+i][q*j.C:])
			}
		}
		return nil
	}
	consume = func(t collectives.Tile, in [][]complex128) error {
		for q, b := range in {
			copy(j.result[q][t.First*j.bpi:], complexBytes(b))
		}
		return nil
	}
	return compute, packOnly, consume
}

func complexBytes(v []complex128) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 16*len(v))
}

// newTiled makes the job's TiledAlltoall and sets its shape: -k and -d,
// or (tune) the guided tuner's choice.
func (j *job) newTiled(ctx context.Context, tune bool) (*collectives.TiledAlltoall[complex128], string, error) {
	cl, err := j.coll(ctx)
	if err != nil {
		return nil, "", err
	}
	a, err := collectives.NewTiledAlltoall[complex128](ctx, cl, j.N, j.C)
	if err != nil {
		return nil, "", err
	}
	compute, _, consume := j.tiledFuncs()
	note := ""
	switch {
	case *kFlag > 0 && *dFlag > 0:
		err = a.SetTiles(ctx, *kFlag, *dFlag)
	case tune:
		var res onesided.TuneResult
		res, err = a.Tune(ctx, onesided.TuneConfig{}, compute, consume)
		note = fmt.Sprintf(", tuned in %v", res.Elapsed.Round(time.Millisecond))
	}
	if err != nil {
		return nil, "", errors.Join(err, a.Free(ctx))
	}
	k, d := a.Tiles()
	return a, fmt.Sprintf("K=%d D=%d%s", k, d, note), nil
}

// collPlain is compute every row, then collectives.Alltoall.
func (j *job) collPlain(ctx context.Context) (func() error, error) {
	cl, err := j.coll(ctx)
	if err != nil {
		return nil, err
	}
	send := make([]complex128, j.N*j.L)
	recv := make([]complex128, j.N*j.L)
	return func() error {
		for r := range j.N {
			j.computeRow(r)
			for q := range j.P {
				copy(send[(q*j.N+r)*j.C:(q*j.N+r+1)*j.C], j.data[r][q*j.C:])
			}
		}
		if err := collectives.Alltoall(ctx, cl, send, recv); err != nil {
			return err
		}
		for q := range j.P {
			copy(j.result[q], complexBytes(recv[q*j.N*j.C:(q+1)*j.N*j.C]))
		}
		return nil
	}, nil
}

// tuneCheck times the guided tuner (three times), the old search (every
// K from 4 to N/2 × D 1..3, one run each) and an exhaustive sweep (every
// K and D, -tunetrials runs each), then runs the shapes they chose side by
// side, -reps times, interleaved: the guided choice should be within 10%
// of the sweep's best.
func tuneCheck(ctx context.Context, j *job) error {
	a, _, err := j.newTiled(ctx, false)
	if err != nil {
		return err
	}
	defer j.cl.Free()
	defer a.Free(ctx)
	compute, _, consume := j.tiledFuncs()
	type tuner struct {
		name string
		tc   onesided.TuneConfig
		res  onesided.TuneResult
	}
	var oldKs []int
	for k := 4; k <= j.N/2; k *= 2 {
		oldKs = append(oldKs, k)
	}
	tuners := []*tuner{
		{name: "guided-1"}, {name: "guided-2"}, {name: "guided-3"},
		{name: "old (1 run each)", tc: onesided.TuneConfig{Ks: oldKs, Exhaustive: true, Trials: 1}},
		{name: "exhaustive", tc: onesided.TuneConfig{Exhaustive: true, Trials: *tuneTrials}},
	}
	for _, t := range tuners {
		if t.res, err = a.Tune(ctx, t.tc, compute, consume); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if j.me == 0 {
			fmt.Fprintf(os.Stderr, "%s: K=%d D=%d in %v, %d runs\n", t.name, t.res.Config.K, t.res.Config.D,
				t.res.Elapsed.Round(time.Millisecond), t.res.Runs)
		}
	}
	best := tuners[len(tuners)-1].res
	// The exhaustive sweep's best by median; run every chosen shape and
	// that best side by side.
	type shape struct{ k, d int }
	var shapes []shape
	for _, t := range tuners {
		if s := (shape{t.res.Config.K, t.res.Config.D}); !slices.Contains(shapes, s) {
			shapes = append(shapes, s)
		}
	}
	times := make(map[shape][]time.Duration)
	ratios := make(map[shape][]float64)
	bestShape := shape{best.Config.K, best.Config.D}
	for rep := -1; rep < *reps; rep++ {
		got := map[shape]time.Duration{}
		for _, s := range shapes {
			if err := a.SetTiles(ctx, s.k, s.d); err != nil {
				return err
			}
			if err := j.c.Barrier(ctx); err != nil {
				return err
			}
			t0 := time.Now()
			if err := a.Run(ctx, compute, consume); err != nil {
				return err
			}
			el, err := j.slowest(ctx, time.Since(t0))
			if err != nil {
				return err
			}
			got[s] = el
		}
		if rep < 0 {
			continue
		}
		for _, s := range shapes {
			times[s] = append(times[s], got[s])
			ratios[s] = append(ratios[s], float64(got[s])/float64(got[bestShape]))
		}
	}
	if j.me != 0 {
		return nil
	}
	var recs []benchrec.Record
	size := fmt.Sprintf("%dx%d-w%d-np%d", j.N, j.L, *work, j.P)
	if !*jsonOut {
		fmt.Printf("ranks %d, %d rows × %d complex per rank, %d FFT(s) per row; side-by-side medians of %d\n\n", j.P, j.N, j.L, *work, *reps)
		fmt.Println("| tuner | tuning time ms | runs | K, D | T ms | T / T_best (median of paired ratios) |")
		fmt.Println("|---|---|---|---|---|---|")
	}
	for _, t := range tuners {
		s := shape{t.res.Config.K, t.res.Config.D}
		med, ratio := medianDur(times[s]), medianF(ratios[s])
		if *jsonOut {
			base := benchrec.Record{Tool: "overlap", Area: "collectives", Case: "tune-" + t.name, Size: size, Reps: *reps}
			r := base
			r.Metric, r.Value, r.Unit = "tune_ms", float64(t.res.Elapsed)/1e6, "ms"
			recs = append(recs, r)
			r = base
			r.Metric, r.Value, r.Ref, r.RefValue, r.Ratio = "t", float64(med)/1e6, "exhaustive best", float64(medianDur(times[bestShape]))/1e6, ratio
			r.Unit = "ms"
			recs = append(recs, r)
			continue
		}
		fmt.Printf("| %s | %.0f | %d | K=%d D=%d | %.3f | %.3f |\n", t.name, float64(t.res.Elapsed)/1e6, t.res.Runs, s.k, s.d, float64(med)/1e6, ratio)
	}
	if *jsonOut {
		return benchrec.Write(os.Stdout, recs)
	}
	return nil
}

// slowest agrees on the slowest rank's time.
func (j *job) slowest(ctx context.Context, el time.Duration) (time.Duration, error) {
	all, err := j.c.Allgather(ctx, []byte(strconv.FormatInt(int64(el), 10)))
	if err != nil {
		return 0, err
	}
	worst := time.Duration(0)
	for _, b := range all {
		v, _ := strconv.ParseInt(string(b), 10, 64)
		worst = max(worst, time.Duration(v))
	}
	return worst, nil
}

func medianDur(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianF(d []float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
