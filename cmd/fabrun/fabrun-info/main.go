// Command fabrun-info prints every libfabric provider configuration with
// what it grants (endpoint type, caps, ordering, MR mode, inject size, CQ
// data, threading, progress), then the RDMA devices, then weft's effective
// settings (name, value and source: default, env or option). "fabrun info"
// runs it:
// it is a separate binary so that fabrun itself does not link libfabric,
// whose dependencies cost every process that loads them about 0.2 s at
// start-up here (see docs/perf/fabrun.md).
//
//	fabrun-info [--provider P]      (WEFT_PROVIDER)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/settings"
)

func main() {
	os.Exit(info(os.Args[1:], os.Stdout, os.Stderr))
}

// info prints every libfabric provider configuration with what it grants,
// then the RDMA devices.
func info(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fabrun info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	provider := fs.String("provider", "", "only this provider (default WEFT_PROVIDER)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fabrun info: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var overrides map[string]string
	if *provider != "" {
		overrides = map[string]string{"WEFT_PROVIDER": *provider}
	}
	if printSettings(stdout, settings.Effective(overrides)) {
		fmt.Fprintln(stderr, "fabrun info: invalid settings (marked above)")
		return 1
	}
	prov := *provider
	if prov == "" {
		prov, _, _ = settings.Str("WEFT_PROVIDER")
	}
	infos, err := fabric.GetInfo(&fabric.Hints{Provider: prov})
	if err != nil {
		fmt.Fprintf(stderr, "fabrun info: %v\n", err)
		return 1
	}
	lines, counts := distinct(infos)
	fmt.Fprintf(stdout, "libfabric providers (%d configurations, %d distinct):\n", len(infos), len(lines))
	for k, l := range lines {
		if counts[k] > 1 {
			fmt.Fprintf(stdout, "  %s (x%d)\n", l, counts[k])
			continue
		}
		fmt.Fprintf(stdout, "  %s\n", l)
	}
	return printDevices(stdout, stderr)
}

// distinct renders each configuration and folds repeats: fi_getinfo lists
// the same provider, fabric and domain several times when they differ only
// in what the summary does not show (address format, mode bits, protocol
// version). It returns the lines in first-seen order and how often each
// appeared.
func distinct(infos []*fabric.Info) (lines []string, counts []int) {
	seen := make(map[string]int)
	for _, i := range infos {
		l := i.String()
		if k, ok := seen[l]; ok {
			counts[k]++
			continue
		}
		seen[l] = len(lines)
		lines = append(lines, l)
		counts = append(counts, 1)
	}
	return lines, counts
}

// printSettings prints every library setting and tuning knob with its
// effective value and source; it reports whether one is invalid.
func printSettings(w io.Writer, vals []settings.Value) (bad bool) {
	fmt.Fprintln(w, "settings (name, value, source):")
	for _, v := range vals {
		val := v.Value
		if val == "" {
			val = `""`
		}
		if v.Err != nil {
			fmt.Fprintf(w, "  %-28s %-12s %s  INVALID: %v\n", v.Name, val, v.Source, v.Err)
			bad = true
			continue
		}
		fmt.Fprintf(w, "  %-28s %-12s %s\n", v.Name, val, v.Source)
	}
	return bad
}
