package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/weft-hpc/weft/test/bench/internal/mpijob"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

//go:embed mpi/osu.c
var mpiOSU []byte

// A contender is one column: a weft layout or an MPI implementation.
type contender struct {
	name string
	mpi  bool
	// argv starts np ranks running the loops with args appended.
	argv func(np int, args []string) []string
}

// cell is one figure: a contender's latency of one collective and size on
// np ranks.
type cell struct {
	name string
	np   int
	coll string
	size int
}

func drive(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "weft-osu-")
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
	figs := sidebyside.NewFigures[cell](cfg.reps)
	args := []string{strconv.Itoa(cfg.iters), strings.Join(cfg.colls, ",")}
	for _, s := range cfg.sizes {
		args = append(args, strconv.Itoa(s))
	}
	for rep := range cfg.reps {
		for _, np := range cfg.nps {
			line := fmt.Sprintf("rep %d np %d:", rep+1, np)
			for _, c := range mpijob.Rotate(cs, rep) {
				out, err := mpijob.Run(ctx, cfg.timeout, c.argv(np, args))
				if err != nil {
					return fmt.Errorf("rep %d, %s on %d ranks: %w", rep+1, c.name, np, err)
				}
				rs, err := parseResults(out)
				if err != nil {
					return fmt.Errorf("rep %d, %s on %d ranks: %w", rep+1, c.name, np, err)
				}
				for _, k := range cfg.colls {
					for _, size := range sizesOf(cfg, k) {
						v, ok := rs[result{k, size}]
						if !ok {
							return fmt.Errorf("rep %d, %s on %d ranks: no result for %s %d B in %q", rep+1, c.name, np, k, size, out)
						}
						figs.Add(cell{c.name, np, k, size}, rep, v)
					}
				}
				k0 := cfg.colls[0]
				s0 := sizesOf(cfg, k0)[0]
				line += fmt.Sprintf(" %s %s us (%s %d B),", c.name, sidebyside.Fig(rs[result{k0, s0}]), k0, s0)
			}
			fmt.Fprintln(stderr, strings.TrimSuffix(line, ","))
		}
	}
	rep := &report{cfg: cfg, figs: figs}
	for _, c := range cs {
		if c.mpi {
			rep.mpis = append(rep.mpis, c.name)
		} else {
			rep.wefts = append(rep.wefts, c.name)
		}
	}
	return sidebyside.Output(cfg.jsonOut, stdout, stderr, rep.print, rep.records)
}

// sizesOf is the sizes collective k runs: 0 alone for the barrier.
func sizesOf(cfg *config, k string) []int {
	if noData(k) {
		return []int{0}
	}
	return cfg.sizes
}

// setup builds the contenders' programs: fabrun for the weft columns (the
// ranks are this command, -role rank), mpi/osu.c with each MPI's compiler;
// an MPI that cannot run here is left out with a note.
func setup(ctx context.Context, cfg *config, tmp string, stderr io.Writer) ([]*contender, error) {
	var cs []*contender
	if len(cfg.weft) > 0 {
		w, err := mpijob.NewWeft(ctx, cfg.fabrun, tmp, "shm", cfg.timeout)
		if err != nil {
			return nil, err
		}
		env := []string{"WEFT_NODE_TRANSPORT=native"}
		for _, l := range cfg.weft {
			c := &contender{name: "weft"}
			c.argv = func(np int, args []string) []string {
				return append(append(w.Launch(np, env), "-role", "rank", "1"), args...)
			}
			switch l {
			case "ep":
				c.name = "weft-ep"
				c.argv = func(np int, args []string) []string {
					return append(append(w.Launch(1, env), "-role", "rank", strconv.Itoa(np)), args...)
				}
			case "hybrid":
				c.name = "weft-hybrid"
				c.argv = func(np int, args []string) []string {
					return append(append(w.Launch(np/2, env), "-role", "rank", "2"), args...)
				}
			case "flat":
				c.name = "weft-flat"
				tune := "collhier=off"
				if t := os.Getenv("WEFT_TUNE"); t != "" {
					tune = t + "," + tune
				}
				flat := append(slices.Clip(env), "WEFT_TUNE="+tune)
				c.argv = func(np int, args []string) []string {
					return append(append(w.Launch(np, flat), "-role", "rank", "1"), args...)
				}
			}
			cs = append(cs, c)
		}
	}
	for _, p := range mpijob.BuildAll(ctx, cfg.refs, mpiOSU, tmp, "osu", stderr) {
		cs = append(cs, &contender{name: p.Name, mpi: true, argv: func(np int, args []string) []string {
			return append(append(p.Launch(np), p.Path), args...)
		}})
	}
	return cs, nil
}

// result is one RESULT line's key.
type result struct {
	coll string
	size int
}

// parseResults reads a job's "RESULT <collective> <bytes> <µs>" lines;
// other lines (launcher chatter) are skipped; a malformed or repeated
// result, or a latency that is not a positive finite number, is an error.
func parseResults(out []byte) (map[result]float64, error) {
	rs := map[result]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "RESULT" {
			continue
		}
		if len(f) != 4 || !knownColl(f[1]) {
			return nil, fmt.Errorf("malformed result line %q", sc.Text())
		}
		size, err1 := strconv.Atoi(f[2])
		v, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil || size < 0 || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("malformed result line %q", sc.Text())
		}
		k := result{f[1], size}
		if _, dup := rs[k]; dup {
			return nil, fmt.Errorf("result %s %d twice", k.coll, k.size)
		}
		rs[k] = v
	}
	return rs, sc.Err()
}
