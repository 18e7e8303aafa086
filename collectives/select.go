package collectives

import (
	"fmt"
	"strings"

	"github.com/weft-hpc/weft/internal/settings"
)

// Collective names a collective operation, to choose its algorithm
// (WithAlgorithm, WithThreshold, Coll.SetAlgorithm).
type Collective uint8

// The collectives that have a choice of algorithm. Gatherv and Scatterv
// are always linear; Exscan follows CollScan and Alltoallv CollAlltoall.
const (
	CollBarrier Collective = iota + 1
	CollBcast
	CollReduce
	CollAllreduce
	CollGather
	CollScatter
	CollAllgather
	CollAllgatherv
	CollAlltoall
	CollReduceScatter
	CollScan
	numColl
)

var collNames = [numColl]string{"", "barrier", "bcast", "reduce", "allreduce", "gather", "scatter",
	"allgather", "allgatherv", "alltoall", "reducescatter", "scan"}

// String returns the collective's name, as in WEFT_TUNE's coll* keys.
func (k Collective) String() string {
	if k == 0 || k >= numColl {
		return fmt.Sprintf("Collective(%d)", int(k))
	}
	return collNames[k]
}

// Algorithm names an algorithm of a collective.
type Algorithm uint8

// Algorithms. Auto picks by message size (WithThreshold) and communicator
// size; docs/collectives.md describes each and which collectives have it.
const (
	Auto                Algorithm = iota
	Linear                        // every rank talks to the root (or to every rank) directly
	Binomial                      // binomial tree: ⌈log₂ p⌉ rounds
	Dissemination                 // barrier: ⌈log₂ p⌉ rounds of messages to rank+2^k
	ScatterAllgather              // bcast: binomial scatter of p blocks, then ring allgather
	RecursiveDoubling             // allreduce, scan: exchange with rank xor 2^k
	Rabenseifner                  // allreduce: recursive-halving reduce-scatter, recursive-doubling allgather
	Ring                          // allreduce, allgather(v), reduce-scatter: p-1 steps to the right neighbour
	Bruck                         // allgather: ⌈log₂ p⌉ rounds of doubling blocks
	Pairwise                      // alltoall: p-1 exchanges with one partner each; reduce-scatter in rank order
	ReduceScatterGather           // reduce: ring reduce-scatter, then the blocks gathered at the root
	Pipeline                      // bcast: segments passed down a chain of the ranks, each forwarded as the next arrives
	numAlg
)

var algNames = [numAlg]string{"auto", "linear", "binomial", "dissemination", "scatterallgather",
	"recdbl", "rabenseifner", "ring", "bruck", "pairwise", "rsgather", "pipeline"}

// String returns the algorithm's name, as WEFT_TUNE's coll* keys take it.
func (a Algorithm) String() string {
	if a >= numAlg {
		return fmt.Sprintf("Algorithm(%d)", int(a))
	}
	return algNames[a]
}

// algs lists the algorithms each collective has, its default small-message
// algorithm first and its large-message one (if any) second; pick's rules
// choose among the others by communicator size.
var algs = [numColl][]Algorithm{
	CollBarrier:       {Dissemination},
	CollBcast:         {Binomial, ScatterAllgather, Linear, Pipeline},
	CollReduce:        {Binomial, ReduceScatterGather, Linear},
	CollAllreduce:     {RecursiveDoubling, Rabenseifner, Ring},
	CollGather:        {Binomial, Linear},
	CollScatter:       {Binomial, Linear},
	CollAllgather:     {Bruck, Ring, RecursiveDoubling},
	CollAllgatherv:    {Linear, Ring},
	CollAlltoall:      {Linear, Pairwise, Bruck},
	CollReduceScatter: {Ring, Pairwise},
	CollScan:          {RecursiveDoubling, Linear},
}

// hasAlg reports whether collective k has algorithm a.
func hasAlg(k Collective, a Algorithm) bool {
	if k == 0 || k >= numColl {
		return false
	}
	for _, b := range algs[k] {
		if a == b {
			return true
		}
	}
	return false
}

// ParseAlgorithm returns the algorithm of collective k named s (the names
// of Algorithm.String, as WEFT_TUNE's coll* keys take them).
func ParseAlgorithm(k Collective, s string) (Algorithm, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for a := Auto; a < numAlg; a++ {
		if algNames[a] == s && (a == Auto || hasAlg(k, a)) {
			return a, nil
		}
	}
	var names []string
	if k > 0 && k < numColl {
		for _, a := range algs[k] {
			names = append(names, a.String())
		}
	}
	return Auto, fmt.Errorf("collectives: %s has no algorithm %q (auto, %s): %w", k, s, strings.Join(names, ", "), ErrInvalid)
}

// config is a handle's algorithm selection and modes.
type config struct {
	det      bool               // reductions in rank order, bitwise the same whatever the algorithm
	check    bool               // agree on every call's arguments before it runs
	progress bool               // the progress goroutine drives nonblocking collectives
	spread   bool               // the ranks are on more than one node (every rank knows alike)
	hier     Hierarchy          // when to combine through a process's memory (hier.go)
	alg      [numColl]Algorithm // forced algorithm (Auto: by size)
	// large is the switch point, in bytes, of each collective with a
	// large-message algorithm: the message (bcast, reduce, allreduce), one
	// rank's block (gather, scatter, alltoall) or the whole result
	// (allgather, allgatherv).
	large [numColl]int
	// stream is the bytes per rank from which the node level streams
	// (hierstream.go).
	stream int
	// stores fixes how the node level's copies into shared memory are
	// written (stores.go; storeAuto: measured)
	stores storeMode
	// thr marks the thresholds given explicitly (WEFT_TUNE's key,
	// WithThreshold), which win over the table.
	thr   [numColl]bool
	table *Table // measured selection (WithTable, WEFT_COLL_TABLE)
}

// defaults returns the configuration WEFT_TUNE and the environment give.
func defaults() (config, error) {
	var cfg config
	t, err := settings.Tune()
	if err != nil {
		return cfg, fmt.Errorf("collectives: %w: %w", err, ErrInvalid)
	}
	cfg.large[CollBcast] = int(t.CollBcastLarge)
	cfg.large[CollReduce] = int(t.CollReduceLarge)
	cfg.large[CollAllreduce] = int(t.CollAllreduceLarge)
	cfg.large[CollGather] = int(t.CollGatherLarge)
	cfg.large[CollScatter] = int(t.CollGatherLarge)
	cfg.large[CollAllgather] = int(t.CollAllgatherLarge)
	cfg.large[CollAllgatherv] = int(t.CollAllgatherLarge)
	cfg.large[CollAlltoall] = int(t.CollAlltoallLarge)
	cfg.stream = int(t.CollNodeStream)
	switch t.CollStores {
	case "stream":
		cfg.stores = storeStreamed
	case "plain":
		cfg.stores = storePlainOnly
	}
	for key, ks := range map[string][]Collective{
		"collbcastlarge": {CollBcast}, "collreducelarge": {CollReduce}, "collallreducelarge": {CollAllreduce},
		"collgatherlarge": {CollGather, CollScatter}, "collallgatherlarge": {CollAllgather, CollAllgatherv},
		"collalltoalllarge": {CollAlltoall},
	} {
		for _, k := range ks {
			cfg.thr[k] = t.IsSet(key)
		}
	}
	if cfg.table, err = tableFromEnv(); err != nil {
		return cfg, fmt.Errorf("collectives: %w", err)
	}
	for k, name := range map[Collective]string{
		CollBcast: t.CollBcast, CollReduce: t.CollReduce, CollAllreduce: t.CollAllreduce,
		CollGather: t.CollGather, CollScatter: t.CollScatter, CollAllgather: t.CollAllgather,
		CollAllgatherv: t.CollAllgatherv, CollAlltoall: t.CollAlltoall,
		CollReduceScatter: t.CollReduceScatter, CollScan: t.CollScan,
	} {
		a, err := ParseAlgorithm(k, name)
		if err != nil {
			return cfg, fmt.Errorf("collectives: %s coll%s: %w", settings.TuneEnv, k, err)
		}
		cfg.alg[k] = a
	}
	if cfg.hier, err = ParseHierarchy(t.CollHier); err != nil {
		return cfg, fmt.Errorf("collectives: %s collhier: %w", settings.TuneEnv, err)
	}
	det, _, err := settings.BoolValue(EnvDeterministic)
	if err != nil {
		return cfg, fmt.Errorf("collectives: %w: %w", err, ErrInvalid)
	}
	check, _, err := settings.BoolValue(EnvCheck)
	if err != nil {
		return cfg, fmt.Errorf("collectives: %w: %w", err, ErrInvalid)
	}
	cfg.det, cfg.check = det, check
	if cfg.progress, _, err = settings.BoolValue(EnvProgress); err != nil {
		return cfg, fmt.Errorf("collectives: %w: %w", err, ErrInvalid)
	}
	return cfg, nil
}

// byRule reports whether pick answers for k with its default rule: no
// algorithm chosen (WithAlgorithm, WEFT_TUNE), no threshold set and no
// row of a measured table for the call.
func (cfg *config) byRule(k Collective, nbytes, p int) bool {
	if cfg.alg[k] != Auto || cfg.thr[k] {
		return false
	}
	_, ok := cfg.table.lookup(k, nbytes, p)
	return !ok
}

// pick returns the algorithm collective k uses for nbytes on p ranks: the
// forced one, else an explicit threshold's choice, else the table's, else
// the default rule's.
func (cfg *config) pick(k Collective, nbytes, p int) Algorithm {
	if a := cfg.alg[k]; a != Auto {
		return a
	}
	if !cfg.thr[k] {
		if a, ok := cfg.table.lookup(k, nbytes, p); ok {
			return a
		}
	}
	small, large := algs[k][0], algs[k][0]
	if len(algs[k]) > 1 {
		large = algs[k][1]
	}
	switch k {
	case CollBcast:
		if p < 3 { // two ranks: the scatter halves nothing
			return small
		}
	case CollReduce:
		if p < 3 { // two ranks: halves both ways and a gather, against one message
			return small
		}
	case CollReduceScatter, CollScan:
		return small
	case CollAllgather:
		if nbytes < cfg.large[k] && p&(p-1) == 0 {
			// a power of two: recursive doubling's rounds are Bruck's
			// without its final rotation of the result
			return RecursiveDoubling
		}
	case CollAlltoall:
		if nbytes <= bruckBlock && p >= bruckRanks && cfg.spread {
			return Bruck
		}
	}
	if nbytes >= cfg.large[k] {
		return large
	}
	return small
}

// Bruck's Alltoall is the default for blocks of up to bruckBlock bytes
// on at least bruckRanks ranks spread over several nodes: ⌈log₂ p⌉
// messages a rank instead of p-1, each carrying about half the blocks
// (MPICH's rule), where a message costs a network's latency. Between the
// ranks of one node a message costs less than Bruck's copies: 8
// processes on one node took 8–256 B blocks in 1.0–1.3 times the linear
// exchange's time (docs/perf/collectives.md).
const (
	bruckBlock = 256
	bruckRanks = 8
)
