package onesided

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// TuneConfig bounds the search of Tune and Autotune.
type TuneConfig struct {
	N, BytesPerIter int
	// Ks and Ds are the candidate tile sizes and depths (defaults: the
	// powers of two up to N and N itself; 1, 2 and 3).
	Ks, Ds []int
	// Trials is the number of timed runs of each candidate in an
	// exhaustive search (default 3, after one untimed round), and of each
	// of the two finalists in the guided search (default 2).
	Trials int
	// Exhaustive times every candidate Trials times (the candidates
	// interleaved, round after round) and picks the lowest median: slow,
	// for checking the guided search.
	Exhaustive bool
	// Budget is what the guided search aims to spend (default 300 ms):
	// when a run of the loop is long, fewer candidates are timed. The
	// measuring runs come first and are always made.
	Budget time.Duration
}

// TuneTrial is a candidate shape the search timed.
type TuneTrial struct {
	K, D int
	// Predicted is the model's estimate of a run (guided search only).
	Predicted time.Duration
	// Times are the candidate's timed runs, each the slowest rank's time.
	Times []time.Duration
}

// Best is the fastest of the trial's runs (0 when it has none).
func (t TuneTrial) Best() time.Duration {
	if len(t.Times) == 0 {
		return 0
	}
	return slices.Min(t.Times)
}

// Median is the median of the trial's runs (0 when it has none).
func (t TuneTrial) Median() time.Duration {
	if len(t.Times) == 0 {
		return 0
	}
	s := slices.Clone(t.Times)
	slices.Sort(s)
	return s[len(s)/2]
}

// TuneResult is what a search found: the chosen shape and the
// measurements it rests on. Every rank gets the same result.
type TuneResult struct {
	Config PipelineConfig
	// Trials are the shapes timed, in the order they were first timed.
	Trials []TuneTrial
	// The guided search's model, per iteration of the loop and per tile,
	// from the slowest rank: compute and consume time per iteration, the
	// cost of a tile's transfer that does not depend on its size, and the
	// transfer cost per iteration's worth of bytes.
	Compute, Consume, TileCost, IterCost time.Duration
	// Runs is the number of pipeline runs the search made; Elapsed how
	// long it took.
	Runs    int
	Elapsed time.Duration
}

// Autotune returns the pipeline shape Tune chooses (see Tune).
func Autotune(ctx context.Context, g Group, tr Transport, tc TuneConfig, compute ComputeFunc, consume ConsumeFunc) (PipelineConfig, error) {
	r, err := Tune(ctx, g, tr, tc, compute, consume)
	return r.Config, err
}

// Tune chooses the tile size K and depth D of a pipeline over g and tr
// for the loop that compute and consume describe. It is collective, and
// every rank gets the same answer: each run counts for the time of its
// slowest rank, shared with Allgather. compute and consume are called
// for the trial runs on whatever the buffers hold, so they must tolerate
// being repeated (an out-of-place computation does).
//
// The guided search (the default) measures before it times:
//
//  1. a warm-up run without the computation, two runs that only move
//     the tiles (compute and consume left out) at two tile sizes, which
//     give the per-tile and the per-byte transfer costs, and one whole run
//     at a middle tile size, timing compute and consume per iteration;
//  2. a model, run(K) = N·(c + b) + tiles(K)·a + K·(c + b) (c compute
//     and consume per iteration, b transfer per iteration, a per tile —
//     the larger of what the transfers alone and the whole run showed —,
//     the last term one tile of skew at the end), ranks the tile sizes;
//  3. the best few tile sizes by the model are timed once each at the
//     deepest D (depth only adds slack for ranks that fall behind, at the
//     cost of buffers), then at the other depths, as many as the Budget
//     allows, and the two fastest again until they have Trials runs; the
//     shape with the fastest run wins.
//
// With TuneConfig.Exhaustive every candidate is timed instead. Progress
// goes to the onesided logger (WEFT_LOG_LEVEL=debug shows each run).
func Tune(ctx context.Context, g Group, tr Transport, tc TuneConfig, compute ComputeFunc, consume ConsumeFunc) (TuneResult, error) {
	start := time.Now()
	if g == nil || tr == nil {
		return TuneResult{}, fmt.Errorf("onesided: Tune: nil group or transport: %w", ErrInvalid)
	}
	if compute == nil || consume == nil {
		return TuneResult{}, fmt.Errorf("onesided: Tune: nil compute or consume function: %w", ErrInvalid)
	}
	if tc.N <= 0 || tc.BytesPerIter <= 0 || tc.Trials < 0 || tc.Budget < 0 {
		return TuneResult{}, fmt.Errorf("onesided: Tune: N=%d BytesPerIter=%d Trials=%d Budget=%v: %w",
			tc.N, tc.BytesPerIter, tc.Trials, tc.Budget, ErrInvalid)
	}
	if len(tc.Ds) == 0 {
		tc.Ds = []int{1, 2, 3}
	}
	if len(tc.Ks) == 0 {
		for k := 1; k < tc.N; k *= 2 {
			tc.Ks = append(tc.Ks, k)
		}
		tc.Ks = append(tc.Ks, tc.N)
	}
	for _, v := range append(slices.Clone(tc.Ks), tc.Ds...) {
		if v <= 0 {
			return TuneResult{}, fmt.Errorf("onesided: Tune: candidate K or D %d: %w", v, ErrInvalid)
		}
	}
	tc.Ks, tc.Ds = sortedSet(tc.Ks), sortedSet(tc.Ds)
	if tc.Budget == 0 {
		tc.Budget = 300 * time.Millisecond
	}
	s := &tuner{g: g, tr: tr, tc: tc, compute: compute, consume: consume}
	// One window for every candidate: later NewPipeline calls reuse it.
	maxD := slices.Max(tc.Ds)
	if err := tr.Prepare(ctx, slices.Max(tc.Ks)*tc.BytesPerIter, maxD+1, 2*maxD); err != nil {
		return TuneResult{}, fmt.Errorf("onesided: Tune: %w", err)
	}
	var err error
	if tc.Exhaustive {
		err = s.exhaustive(ctx)
	} else {
		err = s.guided(ctx)
	}
	s.res.Elapsed = time.Since(start)
	if err != nil {
		return s.res, fmt.Errorf("onesided: Tune: %w", err)
	}
	log.Info("autotune", "K", s.res.Config.K, "D", s.res.Config.D, "runs", s.res.Runs,
		"shapes", len(s.res.Trials), "elapsed", s.res.Elapsed, "exhaustive", tc.Exhaustive)
	return s.res, nil
}

// tuner is one Tune call.
type tuner struct {
	g                Group
	tr               Transport
	tc               TuneConfig
	compute          ComputeFunc
	consume          ConsumeFunc
	res              TuneResult
	p                *Pipeline
	spent            time.Duration // agreed time of the runs so far
	ctime, utime     time.Duration // this rank's compute and consume time in the last run
	pending          []time.Duration
	pendingTrial     []int // per pending time: index in res.Trials, or -1
	noCompute, noUse bool  // the next runs leave compute or consume out
}

func sortedSet(v []int) []int {
	v = slices.Clone(v)
	slices.Sort(v)
	return slices.Compact(v)
}

func (s *tuner) cfg(k, d int) PipelineConfig {
	return PipelineConfig{N: s.tc.N, K: k, D: d, BytesPerIter: s.tc.BytesPerIter}
}

// run makes one run of shape cfg and records this rank's time, to be
// agreed at the next collect; trial is the index in res.Trials it counts
// for, or -1.
func (s *tuner) run(ctx context.Context, cfg PipelineConfig, trial int) error {
	t0 := time.Now()
	if s.p == nil || s.p.Config() != cfg {
		// NewPipeline ends with the transport's synchronisation: the
		// ranks start the run together without a barrier.
		p, err := NewPipeline(ctx, s.tr, cfg)
		if err != nil {
			return fmt.Errorf("K=%d D=%d: %w", cfg.K, cfg.D, err)
		}
		s.p = p
	} else if err := s.g.Barrier(ctx); err != nil {
		return err
	}
	s.ctime, s.utime = 0, 0
	compute := func(t Tile, out [][]byte) error {
		if s.noCompute {
			return nil
		}
		t0 := time.Now()
		err := s.compute(t, out)
		s.ctime += time.Since(t0)
		return err
	}
	consume := func(t Tile, in [][]byte) error {
		if s.noUse {
			return nil
		}
		t0 := time.Now()
		err := s.consume(t, in)
		s.utime += time.Since(t0)
		return err
	}
	prep := time.Since(t0)
	t0 = time.Now()
	if err := s.p.Run(ctx, compute, consume); err != nil {
		return fmt.Errorf("K=%d D=%d: %w", cfg.K, cfg.D, err)
	}
	el := time.Since(t0)
	s.res.Runs++
	s.pending = append(s.pending, el)
	s.pendingTrial = append(s.pendingTrial, trial)
	log.Debug("autotune run", "K", cfg.K, "D", cfg.D, "time", el, "compute", !s.noCompute, "setup", prep)
	return nil
}

// collect agrees on the pending runs' times (each the slowest rank's) and
// on extra, also taking each one's maximum over the ranks; it files each
// time under its trial and returns the agreed times and extras.
func (s *tuner) collect(ctx context.Context, extra ...time.Duration) (times, ext []time.Duration, err error) {
	vals := append(slices.Clone(s.pending), extra...)
	b := make([]byte, 0, 8*len(vals))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	all, err := s.g.Allgather(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	worst := make([]time.Duration, len(vals))
	for r, a := range all {
		if len(a) != len(b) {
			return nil, nil, fmt.Errorf("rank %d reported %d timings, want %d (did the ranks search differently?): %w",
				r, len(a)/8, len(vals), ErrInvalid)
		}
		for i := range worst {
			worst[i] = max(worst[i], time.Duration(binary.LittleEndian.Uint64(a[8*i:])))
		}
	}
	times = worst[:len(s.pending)]
	for i, t := range times {
		s.spent += t
		if j := s.pendingTrial[i]; j >= 0 {
			s.res.Trials[j].Times = append(s.res.Trials[j].Times, t)
		}
	}
	s.pending, s.pendingTrial = s.pending[:0], s.pendingTrial[:0]
	return times, worst[len(times):], nil
}

// trial returns the index of shape (k, d) in res.Trials, adding it.
func (s *tuner) trial(k, d int, pred time.Duration) int {
	for i, t := range s.res.Trials {
		if t.K == k && t.D == d {
			return i
		}
	}
	s.res.Trials = append(s.res.Trials, TuneTrial{K: k, D: d, Predicted: pred})
	return len(s.res.Trials) - 1
}

func (s *tuner) exhaustive(ctx context.Context) error {
	trials := s.tc.Trials
	if trials == 0 {
		trials = 3
	}
	for _, k := range s.tc.Ks {
		for _, d := range s.tc.Ds {
			s.trial(k, d, 0)
		}
	}
	for round := -1; round < trials; round++ {
		for i, t := range s.res.Trials {
			idx := i
			if round < 0 {
				idx = -1
			}
			if err := s.run(ctx, s.cfg(t.K, t.D), idx); err != nil {
				return err
			}
		}
		if _, _, err := s.collect(ctx); err != nil {
			return err
		}
		log.Debug("autotune round", "round", round+1, "of", trials, "shapes", len(s.res.Trials))
	}
	best := -1
	for i, t := range s.res.Trials {
		if best < 0 || t.Median() < s.res.Trials[best].Median() {
			best = i
		}
	}
	s.res.Config = s.cfg(s.res.Trials[best].K, s.res.Trials[best].D)
	return nil
}

// nearest returns the candidate closest to x on a log scale.
func nearest(cands []int, x float64) int {
	best := cands[0]
	for _, c := range cands {
		if math.Abs(math.Log(float64(c)/x)) < math.Abs(math.Log(float64(best)/x)) {
			best = c
		}
	}
	return best
}

func tilesOf(n, k int) int { return (n + k - 1) / k }

func (s *tuner) guided(ctx context.Context) error {
	N, Ks, Ds := s.tc.N, s.tc.Ks, s.tc.Ds
	trials := s.tc.Trials
	if trials == 0 {
		trials = 2
	}
	// Depth only adds slack (a rank may fall up to D tiles behind before
	// its peers wait for it) at the cost of receive buffers: the model
	// prefers the deepest, and shallower ones are timed when the budget
	// allows.
	dTop := Ds[len(Ds)-1]
	k0 := nearest(Ks, max(1, float64(N)/8))
	k1 := nearest(Ks, max(1, float64(k0)/8))
	// 1. Measure: a warm-up that only moves and consumes tiles (whatever
	// the buffers hold, so that the consumer's memory is warm), the
	// transfers alone, one whole run (a timed candidate too), all at k0,
	// then the transfers alone at k1: the shape changes once, and each
	// change costs the ranks a synchronisation.
	probe := s.trial(k0, min(dTop, tilesOf(N, k0)), 0)
	var ctime, utime time.Duration
	for i, k := range []int{k0, k0, k0, k1} {
		s.noCompute, s.noUse = i != 2, i != 0 && i != 2
		idx := -1
		if i == 2 {
			idx = probe
		}
		if err := s.run(ctx, s.cfg(k, min(dTop, tilesOf(N, k))), idx); err != nil {
			return err
		}
		if i == 2 {
			ctime, utime = s.ctime, s.utime
		}
	}
	s.noCompute, s.noUse = false, false
	times, ext, err := s.collect(ctx, ctime, utime)
	if err != nil {
		return err
	}
	times[2], times[3] = times[3], times[2] // transfers at k0, at k1, whole run
	pass := times[3]
	c, u := ext[0]/time.Duration(N), ext[1]/time.Duration(N)
	n0, n1 := tilesOf(N, k0), tilesOf(N, k1)
	var a, fixed float64 // per tile, and for all N iterations' bytes
	if n1 != n0 {
		a = max(0, float64(times[2]-times[1])/float64(n1-n0))
	}
	fixed = max(0, float64(times[1])-float64(n0)*a)
	b := fixed / float64(N)
	// The whole run shows what a tile really costs when ranks also
	// compute (waits for a peer that is descheduled, on a crowded node):
	// what it took beyond the computation and the bytes, per tile, when
	// that is more than the transfers alone showed.
	if over := float64(pass) - float64(N)*float64(c+u) - fixed; over > 0 {
		a = max(a, over/float64(n0))
	}
	s.res.Compute, s.res.Consume = c, u
	s.res.TileCost, s.res.IterCost = time.Duration(a), time.Duration(b)
	per := float64(c+u) + b
	predict := func(k int) time.Duration {
		return time.Duration(float64(N)*per + float64(tilesOf(N, k))*a + float64(k)*per)
	}
	log.Debug("autotune model", "compute/iter", c, "consume/iter", u, "tile", time.Duration(a),
		"transfer/iter", time.Duration(b), "run", pass)
	// 2. Rank the tile sizes by the model; the best few at the deepest
	// depth, then their other depths, in that order.
	ks := slices.Clone(Ks)
	slices.SortStableFunc(ks, func(x, y int) int { return int(predict(x) - predict(y)) })
	allow := 0
	if left := s.tc.Budget - s.spent; left > 0 && pass > 0 {
		allow = int(left / pass)
	}
	stage := max(2, allow-(trials-1)*2)
	ks = ks[:min(len(ks), max(3, stage/len(Ds)))]
	type shape struct{ k, d int }
	var order []shape
	seen := map[shape]bool{}
	add := func(k, d int) {
		sh := shape{k, min(d, tilesOf(N, k))}
		if !seen[sh] {
			seen[sh] = true
			order = append(order, sh)
		}
	}
	for _, k := range ks {
		add(k, dTop)
	}
	for _, k := range ks {
		for _, d := range Ds {
			add(k, d)
		}
	}
	// 3. Time them once each, as the budget allows (the probe's shape has
	// its run), then the two fastest until they have Trials runs.
	for _, sh := range order[:min(len(order), stage)] {
		i := s.trial(sh.k, sh.d, predict(sh.k))
		if len(s.res.Trials[i].Times) > 0 {
			continue
		}
		if err := s.run(ctx, s.cfg(sh.k, sh.d), i); err != nil {
			return err
		}
	}
	if _, _, err := s.collect(ctx); err != nil {
		return err
	}
	s.res.Trials[probe].Predicted = predict(k0)
	byBest := make([]int, len(s.res.Trials))
	for i := range byBest {
		byBest[i] = i
	}
	slices.SortStableFunc(byBest, func(x, y int) int {
		return int(s.res.Trials[x].Best() - s.res.Trials[y].Best())
	})
	for _, i := range byBest[:min(2, len(byBest))] {
		t := s.res.Trials[i]
		for r := len(t.Times); r < trials; r++ {
			if err := s.run(ctx, s.cfg(t.K, t.D), i); err != nil {
				return err
			}
		}
	}
	if _, _, err := s.collect(ctx); err != nil {
		return err
	}
	best := byBest[0]
	for _, i := range byBest[:min(2, len(byBest))] {
		if s.res.Trials[i].Best() < s.res.Trials[best].Best() {
			best = i
		}
	}
	s.res.Config = s.cfg(s.res.Trials[best].K, s.res.Trials[best].D)
	return nil
}
