package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/test/bench/internal/mpijob"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// The tuning run (-tune FILE): for each rank count of -np, a weft job of
// that many ranks (processes, or with -weft ep the handles of one
// process) runs collectives.Tune, which times every algorithm of each
// collective with a choice by size at each size of -sizes; rank 0 prints
// the rule it found ("TABLE ...") and every measurement ("TUNE ...");
// the driver merges the rules of all rank counts into one selection
// table, writes it to FILE (the format WEFT_COLL_TABLE reads) and prints
// what it chose next to what the default thresholds choose.

// tuneMain is one process of a tuning job (-role tune):
//
//	-role tune HANDLES ITERS SIZE...
func tuneMain(args []string, stdout io.Writer) error {
	if len(args) < 3 {
		return fmt.Errorf("%w: -role tune HANDLES ITERS SIZE...", sidebyside.ErrUsage)
	}
	var nums []int
	for _, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 {
			return fmt.Errorf("%w: -role tune: argument %q is not a positive integer", sidebyside.ErrUsage, a)
		}
		nums = append(nums, n)
	}
	tc := C.TuneConfig{Iters: nums[1], Sizes: nums[2:]}
	return onHandles(nums[0], func(ctx context.Context, e *endpoint.Comm) error {
		return tuneHandle(ctx, e, tc, stdout)
	})
}

// tuneHandle runs Tune on one rank; rank 0 prints the table's rules and
// the measurements, each with the algorithm the default thresholds pick.
func tuneHandle(ctx context.Context, e *endpoint.Comm, tc C.TuneConfig, stdout io.Writer) error {
	c, err := C.New(ctx, e, C.WithTable(nil))
	if err != nil {
		return err
	}
	defer c.Free()
	tab, ms, err := C.Tune(ctx, c, tc)
	if err != nil || c.Rank() != 0 {
		return err
	}
	var b bytes.Buffer
	if _, err := tab.WriteTo(&b); err != nil {
		return err
	}
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		if !strings.HasPrefix(line, "#") {
			fmt.Fprintf(&out, "TABLE %s\n", line)
		}
	}
	for _, m := range ms {
		fmt.Fprintf(&out, "TUNE %s %d %d %d %s %d %s %v\n", m.Collective, c.Size(), m.Size, m.Selection, m.Algorithm,
			m.Time.Nanoseconds(), c.Algorithm(m.Collective, m.Selection), m.Chosen)
	}
	_, err = io.WriteString(stdout, out.String())
	return err
}

// tuneDrive runs the tuning jobs and writes the table to path.
func tuneDrive(ctx context.Context, cfg *config, path string, iters int, stdout, stderr io.Writer) error {
	log := hclog.New(&hclog.LoggerOptions{Name: "osu-tune", Level: hclog.Info, Output: stderr})
	tmp, err := os.MkdirTemp("", "weft-osu-tune-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	w, err := mpijob.NewWeft(ctx, cfg.fabrun, tmp, "shm", cfg.timeout)
	if err != nil {
		return err
	}
	// the ranks log each measured size (collectives' own progress)
	env := []string{"WEFT_NODE_TRANSPORT=native", C.EnvTable + "=", "WEFT_LOG_LEVEL=info"}
	layout := "procs"
	if len(cfg.weft) == 1 && cfg.weft[0] == "ep" {
		layout = "ep"
	}
	text := "weft-colltable 1\n"
	var report strings.Builder
	start := time.Now()
	for i, np := range cfg.nps {
		args := []string{"-role", "tune", "1", strconv.Itoa(iters)}
		argv := w.Launch(np, env)
		if layout == "ep" {
			args[2] = strconv.Itoa(np)
			argv = w.Launch(1, env)
		}
		for _, s := range cfg.sizes {
			args = append(args, strconv.Itoa(s))
		}
		log.Info("tuning", "ranks", np, "layout", layout, "job", fmt.Sprintf("%d/%d", i+1, len(cfg.nps)))
		out, err := mpijob.RunTee(ctx, cfg.timeout, append(argv, args...), &progress{w: stderr})
		if err != nil {
			return fmt.Errorf("tuning on %d ranks: %w", np, err)
		}
		rules, lines, err := parseTune(out)
		if err != nil {
			return fmt.Errorf("tuning on %d ranks: %w", np, err)
		}
		text += rules
		report.WriteString(lines)
		log.Info("tuned", "ranks", np, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	tab, err := C.ParseTable(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("the jobs' rules: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := tab.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# tuned selection (%s layout), * where it differs from the default thresholds'; per algorithm the median µs of the slowest rank\n", layout)
	fmt.Fprintf(stdout, "# %-10s %5s %9s  %-16s %-16s %s  %s\n", "collective", "ranks", "size", "tuned", "default", " ", "algorithm µs")
	io.WriteString(stdout, report.String())
	fmt.Fprintf(stdout, "# table written to %s (use it with %s=%s)\n", path, C.EnvTable, path)
	return nil
}

// progress passes a job's output on, except its TABLE and TUNE lines
// (the ranks' log lines show the progress).
type progress struct {
	w    io.Writer
	part []byte
}

func (p *progress) Write(b []byte) (int, error) {
	p.part = append(p.part, b...)
	for {
		i := bytes.IndexByte(p.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := p.part[:i+1]
		if !bytes.HasPrefix(line, []byte("TABLE ")) && !bytes.HasPrefix(line, []byte("TUNE ")) {
			if _, err := p.w.Write(line); err != nil {
				return len(b), err
			}
		}
		p.part = p.part[i+1:]
	}
}

// parseTune reads a tuning job's output: its TABLE lines as table rules,
// and its TUNE lines as the report's lines (one per collective and size).
func parseTune(out []byte) (rules, report string, err error) {
	type key struct {
		coll        string
		np, size    int
		defaultAlg  string
		selectBytes int
	}
	var order []key
	times := map[key][]string{}
	best := map[key]string{} // the chosen algorithm
	var rb strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 0 && f[0] == "TABLE":
			rb.WriteString(strings.Join(f[1:], " ") + "\n")
		case len(f) > 0 && f[0] == "TUNE":
			if len(f) != 9 {
				return "", "", fmt.Errorf("malformed line %q", sc.Text())
			}
			np, e1 := strconv.Atoi(f[2])
			size, e2 := strconv.Atoi(f[3])
			sel, e3 := strconv.Atoi(f[4])
			ns, e4 := strconv.ParseInt(f[6], 10, 64)
			if e1 != nil || e2 != nil || e3 != nil || e4 != nil || ns <= 0 {
				return "", "", fmt.Errorf("malformed line %q", sc.Text())
			}
			k := key{f[1], np, size, f[7], sel}
			if _, ok := times[k]; !ok {
				order = append(order, k)
			}
			times[k] = append(times[k], fmt.Sprintf("%s %.1f", f[5], float64(ns)/1e3))
			if f[8] == "true" {
				best[k] = f[5]
			}
		}
	}
	if rb.Len() == 0 || len(order) == 0 {
		return "", "", fmt.Errorf("no table in the output: %s", out)
	}
	if _, err := C.ParseTable(strings.NewReader("weft-colltable 1\n" + rb.String())); err != nil {
		return "", "", err
	}
	var b strings.Builder
	for _, k := range order {
		mark := " "
		if best[k] != k.defaultAlg {
			mark = "*"
		}
		fmt.Fprintf(&b, "  %-10s %5d %9d  %-16s %-16s %s  %s\n", k.coll, k.np, k.size, best[k], k.defaultAlg, mark, strings.Join(times[k], ", "))
	}
	return rb.String(), b.String(), sc.Err()
}
