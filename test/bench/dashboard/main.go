// Command dashboard regenerates the tables of docs/PERFORMANCE.md from the
// JSON lines the bench tools write with -json (pingpong, endpoint,
// onesided, onesided/overlap, p2p, ddtpp, osu, ddtbench) and from go test
// -bench output.
//
// Usage:
//
//	go run ./test/bench/dashboard [-doc docs/PERFORMANCE.md] [-check] DIR...
//
// Every *.json file of each DIR holds one run's lines (bench records, or
// ddtbench lines, whose ratios to the hand-written loop are taken within
// the file's run); every *.bench file holds go test -bench output. The
// figures of one record key (tool/case/size/metric) are merged over runs
// by their median, the ddtbench and go test figures are summarised
// (geomeans, worst cells, medians; osu's cells into the collectives'
// targets, as osu itself computes them), and each section between
// <!-- dashboard:NAME begin --> and <!-- dashboard:NAME end --> in the
// document is replaced: targets (every target with its record key,
// threshold, measured figure and status), machine (where the figures come
// from), fabric, endpoint, onesided, overlap, p2p, ddtpp, osu and ddt.
// A target whose record is missing shows as not measured. With
// -check the document is left alone and the command fails if it is not up
// to date.
package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errStale = errors.New("document not up to date")

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	doc := fs.String("doc", "docs/PERFORMANCE.md", "the document whose marked sections are rewritten")
	check := fs.Bool("check", false, "fail if the document differs from what the data gives, instead of writing it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("no input directory (usage: dashboard [-doc FILE] [-check] DIR...)")
	}
	var rs []benchrec.Record
	for _, d := range fs.Args() {
		r, err := loadDir(d)
		if err != nil {
			return err
		}
		rs = append(rs, r...)
	}
	rs = aggregate(rs)
	rs = append(rs, derive(rs)...)
	old, err := os.ReadFile(*doc)
	if err != nil {
		return err
	}
	out, err := rewrite(string(old), rs)
	if err != nil {
		return fmt.Errorf("%s: %w", *doc, err)
	}
	if *check {
		if out != string(old) {
			return fmt.Errorf("%s: %w", *doc, errStale)
		}
		return nil
	}
	if out == string(old) {
		return nil
	}
	return os.WriteFile(*doc, []byte(out), 0o644)
}
