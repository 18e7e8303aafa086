// Command ddtbench is a DDTBench-like suite for weft's derived datatypes: the
// application layouts of WRF, MILC, NAS LU and MG, FFT2, SPECFEM3D and LAMMPS,
// each at several sizes, packed and unpacked by several engines side by side.
// Where an application receives with another datatype than it sends with
// (FFT2's all-to-all, SPECFEM3D mt, LAMMPS's ghost atoms) the receive side is
// a case of its own, named with _recv (FFT2's sides are fft2_send and
// fft2_recv). The engines are "manual" (hand-written Go loops), "interp"
// (ddt's interpreter), "copy" (copy() of the same byte count) and any engine
// registered by another file of this package (registerEngine, e.g. "jit").
//
// Usage:
//
//	go run ./test/bench/ddtbench [-json] [-cases REGEXP] [-sizes s,m,l] [-engines manual,interp,copy] [-reps N] [-mintime DUR] [-cache warm|cold]
//
// With -json it prints one JSON object per line:
//
//	{"case":"wrf_x_vec","size":"m","bytes":N,"engine":"interp","op":"pack","ns":X}
//
// where ns is the median over -reps samples of the time of one whole pack
// (or unpack) of the case, and compile_ns is added when an engine reports a
// preparation cost. Engines are timed interleaved (one sample of each engine
// in turn) so their ratios share the machine's noise. Every engine's output
// is checked against the manual loop before timing.
//
// -cache chooses the state of the caches a sample starts from. "warm" (the
// default) makes one untimed call of the same engine and operation before
// each sample, so a sample measures the steady state of repeated packs of
// one message, whatever ran before it: without it, a sample of a few
// calls of a large case (FFT2 l: about four) is dominated by its first call
// after the other engines' buffers went through the caches. "cold" evicts
// the caches before every timed call by writing a buffer of four times the
// last-level cache, and times each call on its own (at most 8 per sample):
// a pack right after computation that streamed other data through the
// caches. Timing single calls adds the clock's cost (tens of ns) to each, so
// cold figures of the small sizes are upper bounds.
//
// Each flag has an environment variable default: WEFT_DDTBENCH_JSON,
// WEFT_DDTBENCH_CASES, WEFT_DDTBENCH_SIZES, WEFT_DDTBENCH_ENGINES,
// WEFT_DDTBENCH_REPS, WEFT_DDTBENCH_MINTIME, WEFT_DDTBENCH_CACHE.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
)

type options struct {
	json    bool
	cases   string
	sizes   string
	engines string
	reps    int
	mintime time.Duration
	cache   string
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// Case is one layout at one size (the catalogue is package ddtcases,
// shared with test/bench/ddtpp).
type Case = ddtcases.Case

// Result is one output line (its -json form is benchrec.DDTResult).
type Result = benchrec.DDTResult

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ddtbench:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("ddtbench", flag.ContinueOnError)
	var o options
	jsonDef, _ := strconv.ParseBool(envOr("WEFT_DDTBENCH_JSON", "false"))
	repsDef, err := strconv.Atoi(envOr("WEFT_DDTBENCH_REPS", "15"))
	if err != nil {
		return fmt.Errorf("WEFT_DDTBENCH_REPS: %w", err)
	}
	minDef, err := time.ParseDuration(envOr("WEFT_DDTBENCH_MINTIME", "2ms"))
	if err != nil {
		return fmt.Errorf("WEFT_DDTBENCH_MINTIME: %w", err)
	}
	fs.BoolVar(&o.json, "json", jsonDef, "print one JSON object per line")
	fs.StringVar(&o.cases, "cases", envOr("WEFT_DDTBENCH_CASES", ""), "regexp selecting case names (empty: all)")
	fs.StringVar(&o.sizes, "sizes", envOr("WEFT_DDTBENCH_SIZES", "s,m,l"), "comma-separated sizes to run")
	fs.StringVar(&o.engines, "engines", envOr("WEFT_DDTBENCH_ENGINES", ""), "comma-separated engines (empty: all registered)")
	fs.IntVar(&o.reps, "reps", repsDef, "samples per engine, case and op (median reported)")
	fs.DurationVar(&o.mintime, "mintime", minDef, "minimum duration of one sample")
	fs.StringVar(&o.cache, "cache", envOr("WEFT_DDTBENCH_CACHE", "warm"), "cache state a sample starts from: warm (one untimed call first) or cold (caches evicted before every call)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.cache != "warm" && o.cache != "cold" {
		return fmt.Errorf("-cache %q: want warm or cold", o.cache)
	}
	if o.reps < 1 {
		return fmt.Errorf("-reps %d: want ≥ 1", o.reps)
	}
	res, err := bench(o, out)
	if err != nil {
		return err
	}
	if !o.json {
		summary(out, res)
	}
	return nil
}

type prepared struct {
	name           string
	pack, unpack   func() error
	compileNS      int64
	packed, typed  []byte
	packNS, unpkNS []float64
}

func bench(o options, out io.Writer) ([]Result, error) {
	// The interp engine measures the interpreter: types are committed
	// interpreted (default JIT mode off); a compiling engine commits its own
	// copy of c.Type.
	ddt.SetDefaultJITMode(ddt.JITOff)
	re, err := regexp.Compile(o.cases)
	if err != nil {
		return nil, fmt.Errorf("-cases: %w", err)
	}
	sizes := strings.Split(o.sizes, ",")
	names := engineNames()
	if o.engines != "" {
		names = nil
		for _, n := range strings.Split(o.engines, ",") {
			if _, ok := engines[n]; !ok {
				return nil, fmt.Errorf("-engines: unknown engine %q (have %v)", n, engineNames())
			}
			names = append(names, n)
		}
	}
	var all []Result
	enc := json.NewEncoder(out)
	for _, c := range ddtcases.All() {
		if !re.MatchString(c.Name) || !slices.Contains(sizes, c.Size) {
			continue
		}
		rs, err := benchCase(c, names, o)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if o.json {
				if err := enc.Encode(r); err != nil {
					return nil, err
				}
			}
		}
		all = append(all, rs...)
	}
	return all, nil
}

func benchCase(c *Case, names []string, o options) ([]Result, error) {
	// Reference: the manual loop's output.
	refTyped := make([]byte, c.Typed)
	ddtcases.Fill(refTyped, 1)
	refPacked := make([]byte, c.Bytes)
	mp, _ := c.Bind(refPacked, refTyped)
	mp()
	stream := make([]byte, c.Bytes)
	ddtcases.Fill(stream, 2)
	refUnpacked := append([]byte(nil), refTyped...)
	_, mu := c.Bind(stream, refUnpacked)
	mu()

	var ps []*prepared
	for _, n := range names {
		p := &prepared{name: n, packed: make([]byte, c.Bytes), typed: make([]byte, c.Typed)}
		copy(p.typed, refTyped)
		var err error
		p.pack, p.unpack, p.compileNS, err = engines[n](c, p.packed, p.typed)
		if errors.Is(err, ddt.ErrNotCompiled) {
			// The engine declines this layout (e.g. a JIT limit): no line.
			fmt.Fprintf(os.Stderr, "ddtbench: %v: engine %s skipped: %v\n", c, n, err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%v engine %s: %w", c, n, err)
		}
		if n != "copy" {
			if err := p.pack(); err != nil {
				return nil, fmt.Errorf("%v engine %s pack: %w", c, n, err)
			}
			if !bytes.Equal(p.packed, refPacked) {
				return nil, fmt.Errorf("%v engine %s: packed bytes differ from the manual loop", c, n)
			}
			copy(p.packed, stream)
			if err := p.unpack(); err != nil {
				return nil, fmt.Errorf("%v engine %s unpack: %w", c, n, err)
			}
			if !bytes.Equal(p.typed, refUnpacked) {
				return nil, fmt.Errorf("%v engine %s: unpacked bytes differ from the manual loop", c, n)
			}
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 { // every engine declined this case
		return nil, nil
	}
	// Calibrate iterations per sample on the manual engine's pack (or the
	// first engine), then time interleaved.
	iters := calibrate(ps[0].pack, o.mintime)
	sample := warmSample
	if o.cache == "cold" {
		sample = coldSample
	}
	for rep := 0; rep < o.reps; rep++ {
		for _, p := range ps {
			ns, err := sample(p.pack, iters)
			if err != nil {
				return nil, err
			}
			p.packNS = append(p.packNS, ns)
			ns, err = sample(p.unpack, iters)
			if err != nil {
				return nil, err
			}
			p.unpkNS = append(p.unpkNS, ns)
		}
	}
	var rs []Result
	for _, p := range ps {
		rs = append(rs,
			Result{Case: c.Name, Size: c.Size, Bytes: c.Bytes, Engine: p.name, Op: "pack", NS: median(p.packNS), CompileNS: p.compileNS},
			Result{Case: c.Name, Size: c.Size, Bytes: c.Bytes, Engine: p.name, Op: "unpack", NS: median(p.unpkNS), CompileNS: p.compileNS})
	}
	return rs, nil
}

func calibrate(f func() error, min time.Duration) int {
	n := 1
	for {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			_ = f()
		}
		d := time.Since(t0)
		if d >= min || n >= 1<<24 {
			return n
		}
		if d <= 0 {
			n *= 16
			continue
		}
		n = int(float64(n)*float64(min)/float64(d)*1.2) + 1
	}
}

// warmSample times n calls of f after one untimed call: ns per call.
func warmSample(f func() error, n int) (float64, error) {
	if err := f(); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(n), nil
}

// evictBytes is the size of the buffer coldSample writes before each call:
// four times a 32 MiB last-level cache.
const evictBytes = 128 << 20

var evictBuf []byte

// evict writes one byte per cache line of a buffer several times the
// last-level cache, so that the next call starts with its buffers in memory.
func evict() {
	if evictBuf == nil {
		evictBuf = make([]byte, evictBytes)
	}
	for i := 0; i < len(evictBuf); i += 64 {
		evictBuf[i]++
	}
}

// coldIters bounds the calls of one cold sample: each costs an eviction of
// several milliseconds.
const coldIters = 8

// coldSample times min(n, coldIters) calls of f, each alone right after
// evict: ns per call.
func coldSample(f func() error, n int) (float64, error) {
	n = min(n, coldIters)
	var total time.Duration
	for i := 0; i < n; i++ {
		evict()
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		total += time.Since(t0)
	}
	return float64(total.Nanoseconds()) / float64(n), nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summary prints a table of medians and the ratio of each engine to manual.
func summary(out io.Writer, res []Result) {
	type key struct{ c, s, op string }
	manual := map[key]float64{}
	for _, r := range res {
		if r.Engine == "manual" {
			manual[key{r.Case, r.Size, r.Op}] = r.NS
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "case\tsize\tbytes\top\tengine\tns\t×manual\tGB/s\t")
	logs := map[string][]float64{}
	worst := map[string]float64{}
	for _, r := range res {
		ratio := math.NaN()
		if m, ok := manual[key{r.Case, r.Size, r.Op}]; ok && m > 0 {
			ratio = r.NS / m
			logs[r.Engine] = append(logs[r.Engine], math.Log(ratio))
			worst[r.Engine] = max(worst[r.Engine], ratio)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%.0f\t%.2f\t%.2f\t\n", r.Case, r.Size, r.Bytes, r.Op, r.Engine, r.NS, ratio, float64(r.Bytes)/r.NS)
	}
	w.Flush()
	for _, e := range engineNames() {
		l, ok := logs[e]
		if !ok || e == "manual" {
			continue
		}
		s := 0.0
		for _, x := range l {
			s += x
		}
		fmt.Fprintf(out, "%s / manual: geomean %.3f, worst %.3f over %d (case, size, op)\n", e, math.Exp(s/float64(len(l))), worst[e], len(l))
	}
}
