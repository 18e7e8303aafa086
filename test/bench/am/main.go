// Command am compares weft's active messages (package am) with UCX's
// (ucp_am_send_nbx), side by side in one run on two processes of one
// node: the round trip of a call answered by its handler, the rate of
// 8-byte active messages sent in windows (and weft's with batching,
// am.WithAggregation, set against UCX's plain rate), and the bandwidth of active
// messages whose handler receives the payload into its own buffer. The
// weft job also times a plain endpoint ping-pong of 8 bytes (p2p), the
// floor its round trip is built on. UCX is built from ucx/am.c with cc
// against Debian's libucx-dev; without it UCX is left out with a note.
//
// Usage (from the repository root):
//
//	go run ./test/bench/am -reps 5 [-sizes 64k,1m] [-window 64] [-json]
//
// It prints medians over the repetitions and weft ÷ UCX, the median of
// the ratios taken within each repetition (for the round trip lower is
// better, for rate and bandwidth higher). With -json the records (tool
// am, area p2p; cases weft, weft-p2p, ucx; metrics lat µs, rate msg/s,
// bw MB/s) go to stdout, the tables to stderr.
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/mpijob"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

//go:embed ucx/am.c
var ucxSrc []byte

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "am:", err)
		os.Exit(sidebyside.ExitCode(err))
	}
}

type config struct {
	sizes         []int
	reps, iters   int
	window        int
	fabrun        string
	timeout       time.Duration
	jsonOut, noUC bool
}

func run(args []string, stdout, stderr io.Writer) error {
	cli := sidebyside.NewCLI("am", "internal: rank, a rank of the weft job", 2*time.Minute, stderr)
	sizes := cli.String("sizes", "64k,1m", "payload sizes of the bandwidth rounds (k, m suffixes)")
	window := cli.Int("window", 64, "active messages per window of the rate and bandwidth rounds")
	iters := cli.Int("iters", 20000, "timed round trips and rate messages (a quarter for each bandwidth size); the warm-up is a tenth")
	noUCX := cli.Bool("no-ucx", false, "leave UCX out")
	if err := cli.Parse(args); err != nil {
		return err
	}
	if cli.Role != "" {
		return rankMain(cli.Role, cli.Args(), stdout)
	}
	cfg := &config{reps: cli.Reps, iters: *iters, window: *window, fabrun: cli.Fabrun, timeout: cli.Timeout, jsonOut: cli.JSON, noUC: *noUCX}
	err := cli.Check(func() (err error) {
		if cfg.sizes, err = sidebyside.Sizes(*sizes, 1<<30); err != nil {
			return err
		}
		if cfg.reps < 1 || cfg.iters < 1 || cfg.window < 1 {
			return errors.New("want -reps, -iters and -window ≥ 1")
		}
		return nil
	})
	if err != nil {
		return err
	}
	return drive(context.Background(), cfg, stdout, stderr)
}

// cell is one figure: a contender's metric (lat, p2p, rate, bw) at size.
type cell struct {
	name, metric string
	size         int
}

func drive(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "weft-am-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	w, err := mpijob.NewWeft(ctx, cfg.fabrun, tmp, "shm", cfg.timeout)
	if err != nil {
		return err
	}
	type contender struct {
		name string
		argv []string
	}
	cs := []contender{{"weft", append(w.Launch(2, nil), "-role", "rank")}}
	if !cfg.noUC {
		if bin, err := buildUCX(ctx, tmp); err != nil {
			fmt.Fprintf(stderr, "am: UCX left out: %v\n", err)
		} else {
			cs = append(cs, contender{"ucx", []string{bin}})
		}
	}
	figs := sidebyside.NewFigures[cell](cfg.reps)
	for rep := range cfg.reps {
		for _, c := range mpijob.Rotate(cs, rep) {
			argv := append(append([]string{}, c.argv...), strconv.Itoa(cfg.iters), strconv.Itoa(sidebyside.WarmupFor(cfg.iters)), strconv.Itoa(cfg.window))
			for _, s := range cfg.sizes {
				argv = append(argv, strconv.Itoa(s))
			}
			out, err := mpijob.Run(ctx, cfg.timeout, argv)
			if err != nil {
				return fmt.Errorf("rep %d, %s: %w", rep+1, c.name, err)
			}
			got := resultLine.FindAllStringSubmatch(string(out), -1)
			line := fmt.Sprintf("rep %d %s:", rep+1, c.name)
			for _, m := range got {
				s, _ := strconv.Atoi(m[2])
				v, err := strconv.ParseFloat(m[3], 64)
				if err != nil || !(v > 0) {
					return fmt.Errorf("rep %d, %s: bad result line %q", rep+1, c.name, m[0])
				}
				figs.Add(cell{c.name, m[1], s}, rep, v)
				line += fmt.Sprintf(" %s %d %s", m[1], s, m[3])
			}
			if want := 2 + len(cfg.sizes); c.name == "ucx" && len(got) != want || c.name == "weft" && len(got) != want+2 {
				return fmt.Errorf("rep %d, %s: %d result lines in %q", rep+1, c.name, len(got), out)
			}
			fmt.Fprintln(stderr, line)
		}
	}
	rp := report{cfg: cfg, figs: figs, ucx: len(cs) > 1}
	return sidebyside.Output(cfg.jsonOut, stdout, stderr, rp.print, rp.records)
}

var resultLine = regexp.MustCompile(`(?m)^RESULT (lat|p2p|rate|ratebatch|bw) (\d+) (\S+)\s*$`)

// buildUCX compiles ucx/am.c into dir with cc and UCX's libraries.
func buildUCX(ctx context.Context, dir string) (string, error) {
	src, bin := filepath.Join(dir, "am_ucx.c"), filepath.Join(dir, "am_ucx")
	if err := os.WriteFile(src, ucxSrc, 0o644); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "cc", "-O2", "-o", bin, src, "-lucp", "-lucs").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cc: %v: %s", err, firstLine(out))
	}
	return bin, nil
}

func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}

type report struct {
	cfg  *config
	figs *sidebyside.Figures[cell]
	ucx  bool
}

// rows are the table's figures: what, metric, size, unit, lower is better.
func (rp *report) rows() []cell {
	rs := []cell{{"", "lat", 8}, {"", "rate", 8}, {"", "ratebatch", 8}}
	for _, s := range rp.cfg.sizes {
		rs = append(rs, cell{"", "bw", s})
	}
	return rs
}

var units = map[string]string{"lat": "us", "p2p": "us", "rate": "msg/s", "ratebatch": "msg/s", "bw": "MB/s"}

// ratio is weft ÷ UCX for k; the batched rate is set against UCX's
// (unbatched) rate, UCX having no batching of its own.
func (rp *report) ratio(k cell) float64 {
	ours := rp.figs.Series(cell{"weft", k.metric, k.size})
	ref := rp.figs.Series(cell{"ucx", refMetric(k.metric), k.size})
	return sidebyside.Median(sidebyside.Ratios(ours, ref))
}

func refMetric(m string) string {
	if m == "ratebatch" {
		return "rate"
	}
	return m
}

func (rp *report) print(w io.Writer) {
	fmt.Fprintf(w, "Active messages between 2 processes, median of %d runs; weft ÷ UCX is the median of the per-run ratios\n\n", rp.cfg.reps)
	fmt.Fprintf(w, "%-22s %12s %12s %8s\n", "", "weft", "ucx", "weft÷ucx")
	for _, k := range rp.rows() {
		label := map[string]string{"lat": "round trip 8 B (µs)", "rate": "rate 8 B (M msg/s)", "ratebatch": "  weft batched (M msg/s)", "bw": fmt.Sprintf("bw %d B (MB/s)", k.size)}[k.metric]
		scale := 1.0
		if k.metric == "rate" || k.metric == "ratebatch" {
			scale = 1e-6
		}
		f := func(name string) string {
			if name == "ucx" {
				return sidebyside.Fig(scale * sidebyside.Median(rp.figs.Series(cell{name, refMetric(k.metric), k.size})))
			}
			return sidebyside.Fig(scale * sidebyside.Median(rp.figs.Series(cell{name, k.metric, k.size})))
		}
		r := "-"
		if rp.ucx {
			r = sidebyside.RatioFig(rp.ratio(k))
		}
		fmt.Fprintf(w, "%-22s %12s %12s %8s\n", label, f("weft"), f("ucx"), r)
	}
	fmt.Fprintf(w, "%-22s %12s\n", "p2p round trip 8 B (µs)", sidebyside.Fig(sidebyside.Median(rp.figs.Series(cell{"weft", "p2p", 8}))))
}

func (rp *report) records() []benchrec.Record {
	var out []benchrec.Record
	for _, k := range append(rp.rows(), cell{"", "p2p", 8}) {
		for _, name := range []string{"weft", "ucx"} {
			v := rp.figs.Series(cell{name, k.metric, k.size})
			if sidebyside.Count(v) == 0 {
				continue
			}
			c, metric := name, k.metric
			if metric == "p2p" {
				c, metric = "weft-p2p", "lat"
			}
			r := benchrec.Record{Tool: "am", Area: "p2p", Case: c, Size: strconv.Itoa(k.size), Metric: metric,
				Value: sidebyside.Median(v), Unit: units[k.metric], Reps: rp.cfg.reps, Stat: "median"}
			if name == "weft" && k.metric != "p2p" && rp.ucx {
				r.Ref, r.RefValue = "ucx", benchrec.Finite(sidebyside.Median(rp.figs.Series(cell{"ucx", refMetric(k.metric), k.size})))
				r.Ratio = benchrec.Finite(rp.ratio(k))
			}
			out = append(out, r)
		}
	}
	return out
}
