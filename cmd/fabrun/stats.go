package main

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// rankStats is one rank's file, weft-stats.RANK.json, as endpoint's
// World.Close writes it where WEFT_STATS says (endpoint.Stats; fabrun
// does not link endpoint, which would bring libfabric's start-up).
type rankStats struct {
	Rank  int     `json:"rank"`
	Size  int     `json:"size"`
	Host  string  `json:"host"`
	Sent  traffic `json:"sent"`
	Peers []struct {
		Rank      int    `json:"rank"`
		Transport string `json:"transport"`
		traffic
	} `json:"peers"`
}

type traffic struct {
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
}

func (t *traffic) add(u traffic) {
	t.Messages += u.Messages
	t.Bytes += u.Bytes
}

// jobStats is a job's traffic, put together from its ranks' files.
type jobStats struct {
	size    int
	ranks   []*rankStats // by rank; nil where a rank wrote no file
	missing []int
}

// readStats reads every weft-stats.RANK.json in dir.
func readStats(dir string) (*jobStats, error) {
	names, err := filepath.Glob(filepath.Join(dir, "weft-stats.*.json"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no weft-stats.RANK.json in %s (set WEFT_STATS=%s for the job's ranks)", dir, dir)
	}
	var all []*rankStats
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		rs := &rankStats{}
		if err := json.Unmarshal(b, rs); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if rs.Size <= 0 || rs.Rank < 0 || rs.Rank >= rs.Size {
			return nil, fmt.Errorf("%s: rank %d of %d", name, rs.Rank, rs.Size)
		}
		all = append(all, rs)
	}
	js := &jobStats{size: all[0].Size}
	js.ranks = make([]*rankStats, js.size)
	for _, rs := range all {
		if rs.Size != js.size {
			return nil, fmt.Errorf("%s holds files of jobs of %d and %d ranks", dir, js.size, rs.Size)
		}
		js.ranks[rs.Rank] = rs
	}
	for r, rs := range js.ranks {
		if rs == nil {
			js.missing = append(js.missing, r)
		}
	}
	return js, nil
}

// report writes the job's traffic: a line per rank (sent, received —
// the column of the matrix — and per transport), then the matrix of
// bytes sent for up to 16 ranks, else the 10 busiest pairs.
func (js *jobStats) report(w io.Writer) {
	p := js.size
	recv := make([]traffic, p)
	sent := make([]traffic, p)
	byTr := make([]map[string]uint64, p)
	matrix := make([][]uint64, p)
	var total traffic
	for r, rs := range js.ranks {
		byTr[r] = map[string]uint64{}
		matrix[r] = make([]uint64, p)
		if rs == nil {
			continue
		}
		for _, pt := range rs.Peers {
			if pt.Rank < 0 || pt.Rank >= p {
				continue
			}
			sent[r].add(pt.traffic)
			recv[pt.Rank].add(pt.traffic)
			byTr[r][pt.Transport] += pt.Messages
			matrix[r][pt.Rank] += pt.Bytes
			total.add(pt.traffic)
		}
	}
	fmt.Fprintf(w, "weft stats: %d ranks, %d messages, %s sent (point-to-point, as counted at each send)\n", p, total.Messages, human(total.Bytes))
	if len(js.missing) > 0 {
		fmt.Fprintf(w, "no statistics from ranks %v (they did not reach World.Close, or wrote on another host: give WEFT_STATS a shared directory and run fabrun stats DIR)\n", js.missing)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\thost\tsent msgs\tsent bytes\trecv msgs\trecv bytes\tnode msgs\tfabric msgs\t")
	for r, rs := range js.ranks {
		host := "?"
		if rs != nil {
			host = rs.Host
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%s\t%d\t%d\t\n", r, host, sent[r].Messages, human(sent[r].Bytes),
			recv[r].Messages, human(recv[r].Bytes), byTr[r]["node"], byTr[r]["fabric"])
	}
	tw.Flush()
	if p <= 16 {
		fmt.Fprintln(w, "bytes sent (row: from, column: to):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "\t")
		for c := range p {
			fmt.Fprintf(tw, "%d\t", c)
		}
		fmt.Fprintln(tw)
		for r := range p {
			fmt.Fprintf(tw, "%d\t", r)
			for c := range p {
				fmt.Fprintf(tw, "%s\t", human(matrix[r][c]))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		return
	}
	type pair struct {
		from, to int
		bytes    uint64
	}
	var pairs []pair
	for r := range p {
		for c := range p {
			if matrix[r][c] > 0 {
				pairs = append(pairs, pair{r, c, matrix[r][c]})
			}
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Compare(b.bytes, a.bytes) })
	fmt.Fprintf(w, "busiest of %d pairs (bytes sent):\n", len(pairs))
	for _, pr := range pairs[:min(10, len(pairs))] {
		fmt.Fprintf(w, "  %d -> %d  %s\n", pr.from, pr.to, human(pr.bytes))
	}
}

// writeCSV writes one line per rank, peer and transport: from, to,
// transport, messages, bytes.
func (js *jobStats) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"from", "to", "transport", "messages", "bytes"}); err != nil {
		return err
	}
	for _, rs := range js.ranks {
		if rs == nil {
			continue
		}
		for _, pt := range rs.Peers {
			if err := cw.Write([]string{strconv.Itoa(rs.Rank), strconv.Itoa(pt.Rank), pt.Transport,
				strconv.FormatUint(pt.Messages, 10), strconv.FormatUint(pt.Bytes, 10)}); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// human writes a byte count with a binary unit.
func human(b uint64) string {
	if b < 1024 {
		return strconv.FormatUint(b, 10) + " B"
	}
	f, units := float64(b)/1024, []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[i]
}

// stats runs "fabrun stats [--csv FILE] DIR".
func stats(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fabrun stats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	csvPath := fs.String("csv", "", "also write every rank's traffic per peer and transport to this CSV file (from,to,transport,messages,bytes)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fabrun stats [--csv FILE] DIR\n\nReports the point-to-point traffic of a job whose ranks ran with WEFT_STATS=DIR.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	js, err := readStats(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "fabrun stats: %v\n", err)
		return 1
	}
	js.report(stdout)
	if *csvPath != "" {
		var b strings.Builder
		if err := js.writeCSV(&b); err == nil {
			err = os.WriteFile(*csvPath, []byte(b.String()), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "fabrun stats: %v\n", err)
			return 1
		}
	}
	return 0
}
