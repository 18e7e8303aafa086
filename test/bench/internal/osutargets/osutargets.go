// Package osutargets holds the targets of weft's collectives against MPI
// and how they are computed from the per-cell ratios of test/bench/osu
// (latency of a weft contender ÷ the faster MPI on the same collective,
// size and rank count): test/bench/osu prints them and test/bench/dashboard
// derives them from osu's -json records, with the same definitions.
//
// Per weft contender and rank count:
//
//	the geometric mean of the ratios of sizes ≤ 1 KiB ≤ 1.0
//	(the barrier counts as size 0),
//	the worst ratio over all cells ≤ 1.25,
//	the worst ratio at sizes ≥ 1 MiB ≤ 1.0 (bandwidth ≥ 1.0×);
//
// and, once, 4 endpoints of one process ≥ 5× faster than 4 MPI processes
// on an 8-byte Allreduce.
package osutargets

import (
	"math"
	"strconv"
)

// Thresholds of the targets, on latency ÷ the faster MPI.
const (
	SmallMax    = 1 << 10 // largest size of the geometric-mean target
	GeoTarget   = 1.0     // geometric mean over sizes ≤ SmallMax
	CellTarget  = 1.25    // every cell
	LargeMin    = 1 << 20 // smallest size of the large-message target
	LargeTarget = 1.0     // every cell of size ≥ LargeMin
	SpeedupMin  = 5.0     // the endpoint Allreduce speedup
)

// The cell of the speedup target: Allreduce of SpeedupSize bytes on
// SpeedupNP endpoint handles of one process (contender SpeedupContender)
// against as many MPI processes.
const (
	SpeedupContender = "weft-ep"
	SpeedupNP        = 4
	SpeedupColl      = "allreduce"
	SpeedupSize      = 8
)

// Ratio is one cell's latency ÷ the faster MPI (NaN or ≤ 0: not measured).
type Ratio struct {
	Coll  string
	Size  int // bytes; 0 for the barrier
	Ratio float64
}

// Summary is one contender's targets on one rank count. A figure that no
// cell gives is NaN.
type Summary struct {
	Geomean   float64 // over the cells of size ≤ SmallMax
	Small     int     // how many cells the geometric mean is over
	Worst     float64 // over all cells
	WorstCell string  // "collective size"
	Large     float64 // worst over the cells of size ≥ LargeMin
	LargeCell string
}

// Summarise computes the targets' figures from one contender's ratios on
// one rank count; cells without a ratio are left out.
func Summarise(rs []Ratio) Summary {
	s := Summary{Geomean: math.NaN(), Worst: math.NaN(), Large: math.NaN()}
	var logs float64
	for _, r := range rs {
		q := r.Ratio
		if math.IsNaN(q) || q <= 0 {
			continue
		}
		where := Cell(r.Coll, r.Size)
		if r.Size <= SmallMax {
			logs += math.Log(q)
			s.Small++
		}
		if math.IsNaN(s.Worst) || q > s.Worst {
			s.Worst, s.WorstCell = q, where
		}
		if r.Size >= LargeMin && (math.IsNaN(s.Large) || q > s.Large) {
			s.Large, s.LargeCell = q, where
		}
	}
	if s.Small > 0 {
		s.Geomean = math.Exp(logs / float64(s.Small))
	}
	return s
}

// Speedup is how many times faster the speedup cell is than the faster
// MPI, from its ratio (latency ÷ the faster MPI's); NaN where not measured.
func Speedup(ratio float64) float64 {
	if math.IsNaN(ratio) || ratio <= 0 {
		return math.NaN()
	}
	return 1 / ratio
}

// Cell names a cell the way the tables do: "allreduce 1K", "barrier".
func Cell(coll string, size int) string {
	if coll == "barrier" {
		return coll
	}
	return coll + " " + SizeLabel(size)
}

// SizeLabel writes a size the way the tables do: 8, 1K, 64K, 1M.
func SizeLabel(s int) string {
	switch {
	case s >= 1<<20 && s%(1<<20) == 0:
		return strconv.Itoa(s>>20) + "M"
	case s >= 1<<10 && s%(1<<10) == 0:
		return strconv.Itoa(s>>10) + "K"
	}
	return strconv.Itoa(s)
}
