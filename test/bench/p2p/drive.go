package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/weft-hpc/weft/test/bench/internal/fipingpong"
	"github.com/weft-hpc/weft/test/bench/internal/mpijob"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

//go:embed mpi/pingpong.c
var mpiPingpong []byte

//go:embed mpi/msgrate.c
var mpiMsgrate []byte

//go:embed floor/floor.c
var floorC []byte

// floorKinds maps each floor column to floor.c's ping-pong kind.
var floorKinds = map[string]string{"floor": "cma", "floor-thp": "cmathp", "floor-fresh": "cmafresh", "floor-memcpy": "memcpy"}

// Kinds of contender.
const (
	kindWeft = iota
	kindFI
	kindMPI
	kindFloor // floor/floor.c: the pattern without a library
)

// A contender is one column: a weft transport, fi_pingpong or an MPI.
type contender struct {
	name string
	kind int
	env  []string // weft: the job's extra environment
	// MPI: the built programs; floor: the program (in pingpong) and its
	// ping-pong kind.
	pingpong, msgrate string
	floorKind         string
	// launch is the argv that starts np ranks (weft: of this command, to
	// which the role's arguments are appended; MPI: of the program that
	// follows).
	launch func(np int) []string
}

// mpiRate maps each rate case to the MPIs' case it is compared with.
var mpiRate = map[string]string{"1": "1", "2": "2", "2ep": "2", "1b": "1", "2epb": "2"}

// runs reports whether c takes part in a measurement: ping-pong (rate
// "") or a rate case.
func (c *contender) runs(rate string) bool {
	switch {
	case rate == "":
		return true
	case c.kind == kindFI:
		return false
	case c.kind == kindMPI:
		return mpiRate[rate] == rate
	case c.kind == kindFloor: // the ring's rate: "floor" only, 1 and 2 pairs
		return c.name == "floor" && (rate == "1" || rate == "2")
	}
	return true
}

// drive sets the contenders up, runs the repetitions and reports.
func drive(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "weft-p2p-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cs, err := setup(ctx, cfg, tmp, stderr)
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		return errors.New("no contender can run here")
	}
	res := newResults(cfg.reps)
	// The MPIs run every case some weft case is compared with, even when
	// that case is not asked for itself.
	rateLabels := []string{}
	for _, l := range []string{"1", "2", "2ep", "1b", "2epb"} {
		if slices.Contains(cfg.rates, l) || slices.ContainsFunc(cfg.rates, func(r string) bool { return mpiRate[r] == l }) {
			rateLabels = append(rateLabels, l)
		}
	}
	for rep := range cfg.reps {
		for _, size := range cfg.sizes {
			line := fmt.Sprintf("rep %d size %d:", rep+1, size)
			for _, c := range mpijob.Rotate(cs, rep) {
				if !c.runs("") {
					continue
				}
				lat, bw, err := pingpong(ctx, cfg, c, size)
				if err != nil {
					return fmt.Errorf("rep %d, %s ping-pong %d B: %w", rep+1, c.name, size, err)
				}
				res.Add(cell{c.name, "lat", strconv.Itoa(size)}, rep, lat)
				res.Add(cell{c.name, "bw", strconv.Itoa(size)}, rep, bw)
				line += fmt.Sprintf(" %s %.3f us %.1f MB/s,", c.name, lat, bw)
			}
			fmt.Fprintln(stderr, strings.TrimSuffix(line, ","))
		}
		for _, l := range rateLabels {
			line := fmt.Sprintf("rep %d rate %s:", rep+1, l)
			for _, c := range mpijob.Rotate(cs, rep) {
				if !c.runs(l) || (c.kind == kindWeft && !slices.Contains(cfg.rates, l)) {
					continue
				}
				v, err := msgrate(ctx, cfg, c, l)
				if err != nil {
					return fmt.Errorf("rep %d, %s rate case %s: %w", rep+1, c.name, l, err)
				}
				res.Add(cell{c.name, "msgrate", l}, rep, v)
				line += fmt.Sprintf(" %s %.0f msg/s,", c.name, v)
			}
			fmt.Fprintln(stderr, strings.TrimSuffix(line, ","))
		}
	}
	rep := report{cfg: cfg, res: res}
	for _, c := range cs {
		switch c.kind {
		case kindWeft:
			rep.wefts = append(rep.wefts, c.name)
		case kindFI:
			rep.fi = c.name
		case kindMPI:
			rep.mpis = append(rep.mpis, c.name)
		case kindFloor:
			rep.floors = append(rep.floors, c.name)
		}
	}
	return sidebyside.Output(cfg.jsonOut, stdout, stderr, rep.print, rep.records)
}

// weftColumn names the column of WEFT_NODE_TRANSPORT value v.
func weftColumn(v string) string {
	if v == "native" {
		return "weft"
	}
	return "weft-" + v
}

// setup finds or builds every contender's programs; a reference that
// cannot run here is left out with a note on stderr.
func setup(ctx context.Context, cfg *config, tmp string, stderr io.Writer) ([]*contender, error) {
	var cs []*contender
	if len(cfg.weft) > 0 {
		w, err := mpijob.NewWeft(ctx, cfg.fabrun, tmp, cfg.provider, cfg.timeout)
		if err != nil {
			return nil, err
		}
		for _, v := range cfg.weft {
			v, tuneKV, tuned := strings.Cut(v, ":")
			tr, thp := strings.CutSuffix(v, "+thp")
			c := &contender{name: weftColumn(tr), kind: kindWeft, env: []string{"WEFT_NODE_TRANSPORT=" + tr}}
			if thp { // ping-pong buffers on transparent huge pages
				c.name += "-thp"
				c.env = append(c.env, envBufs+"=thp")
			}
			if tuned { // an A/B of WEFT_TUNE knobs
				c.name += ":" + tuneKV
				c.env = append(c.env, "WEFT_TUNE="+strings.ReplaceAll(tuneKV, "/", ","))
			}
			c.launch = func(np int) []string { return w.Launch(np, c.env) }
			cs = append(cs, c)
		}
	}
	floorProg := ""
	for _, r := range cfg.refs {
		var c *contender
		var err error
		switch r {
		case "floor", "floor-thp", "floor-fresh", "floor-memcpy":
			if floorProg == "" {
				floorProg = filepath.Join(tmp, "floor")
				if err = buildFloor(ctx, floorProg); err != nil {
					floorProg = ""
					break
				}
			}
			c = &contender{name: r, kind: kindFloor, pingpong: floorProg, floorKind: floorKinds[r]}
		case "fi_pingpong":
			if len(cfg.sizes) == 0 {
				continue
			}
			if _, err = exec.LookPath(cfg.fiPath); err == nil {
				c = &contender{name: r, kind: kindFI}
			}
		case "mpich", "openmpi":
			c, err = buildMPI(ctx, tmp, r)
		}
		if err != nil || c == nil {
			fmt.Fprintf(stderr, "p2p: %s left out: %v\n", r, err)
			continue
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// buildFloor compiles floor/floor.c with the system's C compiler.
func buildFloor(ctx context.Context, out string) error {
	src := out + ".c"
	if err := os.WriteFile(src, floorC, 0o644); err != nil {
		return err
	}
	if b, err := exec.CommandContext(ctx, "cc", "-O2", "-o", out, src).CombinedOutput(); err != nil {
		return fmt.Errorf("cc floor.c: %v: %s", err, b)
	}
	return nil
}

// buildMPI finds MPI implementation name (mpijob.Find) and compiles the
// MPI programs with it into tmp.
func buildMPI(ctx context.Context, tmp, name string) (*contender, error) {
	m, err := mpijob.Find(ctx, name)
	if err != nil {
		return nil, err
	}
	c := &contender{name: name, kind: kindMPI, launch: m.Launch,
		pingpong: filepath.Join(tmp, name+"-pingpong"), msgrate: filepath.Join(tmp, name+"-msgrate")}
	if err := m.Build(ctx, mpiPingpong, c.pingpong); err != nil {
		return nil, err
	}
	if err := m.Build(ctx, mpiMsgrate, c.msgrate); err != nil {
		return nil, err
	}
	return c, nil
}

// pingpong runs one ping-pong job of c at size bytes and returns the half
// round trip (µs) and the bandwidth (MB/s).
func pingpong(ctx context.Context, cfg *config, c *contender, size int) (lat, bw float64, err error) {
	n := itersFor(cfg.iters, size)
	if c.kind == kindFI {
		ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
		r, err := fipingpong.Run(ctx, cfg.fiPath, cfg.provider, size, n)
		return r.Usec, r.MBps, err
	}
	args := []string{strconv.Itoa(n), strconv.Itoa(sidebyside.WarmupFor(n)), strconv.Itoa(size)}
	var argv []string
	switch c.kind {
	case kindWeft:
		argv = append(append(c.launch(2), "-role", "pingpong"), args...)
	case kindFloor:
		argv = append([]string{c.pingpong, "pingpong", c.floorKind}, args...)
	default:
		argv = append(append(c.launch(2), c.pingpong), args...)
	}
	out, err := mpijob.Run(ctx, cfg.timeout, argv)
	if err != nil {
		return 0, 0, err
	}
	rs, err := parseResults(out)
	if err != nil {
		return 0, 0, err
	}
	lat, ok1 := rs[resultKey{"lat", size}]
	bw, ok2 := rs[resultKey{"bw", size}]
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("no lat and bw result for %d B in %q", size, out)
	}
	return lat, bw, nil
}

// msgrate runs one message-rate job of c for rate case l and returns the
// messages per second of all pairs.
func msgrate(ctx context.Context, cfg *config, c *contender, l string) (float64, error) {
	np, handles, batch := 2, 1, "0"
	switch l {
	case "2":
		np = 4
	case "2ep":
		handles = 2
	case "1b":
		batch = "1"
	case "2epb":
		handles, batch = 2, "1"
	}
	args := []string{strconv.Itoa(cfg.window), strconv.Itoa(cfg.windows), strconv.Itoa(sidebyside.WarmupFor(cfg.windows)), strconv.Itoa(cfg.msgSize)}
	var argv []string
	switch c.kind {
	case kindWeft:
		argv = append(append(append(c.launch(np), "-role", "msgrate"), args...), strconv.Itoa(handles), batch)
	case kindFloor:
		argv = append([]string{c.pingpong, "msgrate", strconv.Itoa(np / 2)}, args...)
	default:
		argv = append(append(c.launch(np), c.msgrate), args...)
	}
	out, err := mpijob.Run(ctx, cfg.timeout, argv)
	if err != nil {
		return 0, err
	}
	rs, err := parseResults(out)
	if err != nil {
		return 0, err
	}
	v, ok := rs[resultKey{"msgrate", cfg.msgSize}]
	if !ok {
		return 0, fmt.Errorf("no msgrate result in %q", out)
	}
	return v, nil
}

// resultKey names one RESULT line: metric and message bytes.
type resultKey struct {
	metric string
	size   int
}

var resultLine = regexp.MustCompile(`(?m)^RESULT (\S+) (\S+) (\S+)\s*$`)

// parseResults reads the "RESULT metric bytes value" lines of a job's
// output (the MPI programs' and the weft ranks'); a malformed or
// non-positive figure, or a line given twice, is an error.
func parseResults(out []byte) (map[resultKey]float64, error) {
	rs := map[resultKey]float64{}
	for _, m := range resultLine.FindAllStringSubmatch(string(out), -1) {
		size, err1 := strconv.Atoi(m[2])
		v, err2 := strconv.ParseFloat(m[3], 64)
		if err1 != nil || err2 != nil || size < 0 || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("bad result line %q", m[0])
		}
		k := resultKey{m[1], size}
		if _, dup := rs[k]; dup {
			return nil, fmt.Errorf("result %s %d given twice", m[1], size)
		}
		rs[k] = v
	}
	return rs, nil
}
