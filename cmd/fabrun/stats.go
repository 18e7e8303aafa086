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
	"time"
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
	Layers struct {
		// per collective: blocking calls, the nanoseconds spent in
		// them, nonblocking (and persistent) calls started and the
		// nanoseconds their requests' Waits took
		Collectives map[string]struct {
			Calls   uint64 `json:"calls"`
			NS      uint64 `json:"ns"`
			Started uint64 `json:"started"`
			WaitNS  uint64 `json:"wait_ns"`
		} `json:"collectives"`
		// one-sided operations issued and their bytes, per kind (put,
		// get, signal, atomic) and per target process
		Onesided struct {
			Kinds map[string]opCount `json:"kinds"`
			Peers []struct {
				Rank int `json:"rank"`
				opCount
			} `json:"peers"`
		} `json:"onesided"`
		// per active-message handler id: messages sent (calls
		// included), handled, header and payload bytes sent
		AM map[string]struct {
			Sent    uint64 `json:"sent"`
			Handled uint64 `json:"handled"`
			Bytes   uint64 `json:"bytes"`
		} `json:"am"`
	} `json:"layers"`
}

type opCount struct {
	Ops   uint64 `json:"ops"`
	Bytes uint64 `json:"bytes"`
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
	js.reportCollectives(w)
	js.reportOnesided(w)
	js.reportAM(w)
	writeMatrix(w, matrix, "bytes sent (row: from, column: to)", "busiest of %d pairs (bytes sent)")
}

// writeMatrix writes a job's matrix of bytes (row: from, column: to)
// under title for up to 16 ranks, else its 10 busiest pairs under
// busiest (a format taking their number).
func writeMatrix(w io.Writer, matrix [][]uint64, title, busiest string) {
	p := len(matrix)
	if p <= 16 {
		fmt.Fprintln(w, title+":")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
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
	fmt.Fprintf(w, busiest+":\n", len(pairs))
	for _, pr := range pairs[:min(10, len(pairs))] {
		fmt.Fprintf(w, "  %d -> %d  %s\n", pr.from, pr.to, human(pr.bytes))
	}
}

// reportCollectives writes, when the ranks counted their collectives, a
// line per collective: blocking calls and the time in them over all
// ranks, the slowest rank's time, the mean call, nonblocking calls
// started; the most time first.
func (js *jobStats) reportCollectives(w io.Writer) {
	type line struct {
		name                       string
		calls, ns, started, waitNS uint64
		maxNS                      uint64
		maxRank                    int
	}
	byName := map[string]*line{}
	for _, rs := range js.ranks {
		if rs == nil {
			continue
		}
		for name, c := range rs.Layers.Collectives {
			l := byName[name]
			if l == nil {
				l = &line{name: name, maxRank: -1}
				byName[name] = l
			}
			l.calls += c.Calls
			l.ns += c.NS
			l.started += c.Started
			l.waitNS += c.WaitNS
			if l.maxRank < 0 || c.NS > l.maxNS {
				l.maxNS, l.maxRank = c.NS, rs.Rank
			}
		}
	}
	if len(byName) == 0 {
		return
	}
	lines := make([]*line, 0, len(byName))
	for _, l := range byName {
		lines = append(lines, l)
	}
	slices.SortFunc(lines, func(a, b *line) int {
		if c := cmp.Compare(b.ns, a.ns); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	fmt.Fprintln(w, "collectives (blocking calls and the time in them, over all ranks; nonblocking calls started and the time in their Waits):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "collective\tcalls\ttime\tslowest rank\tmean call\tstarted\tin Wait\t")
	for _, l := range lines {
		mean := "-"
		if l.calls > 0 {
			mean = dur(l.ns / l.calls)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s (%d)\t%s\t%d\t%s\t\n", l.name, l.calls, dur(l.ns), dur(l.maxNS), l.maxRank, mean, l.started, dur(l.waitNS))
	}
	tw.Flush()
}

// reportOnesided writes, when the ranks counted one-sided operations, a
// line per rank: operations and bytes per kind; then the bytes each
// rank's operations moved to or from each target.
func (js *jobStats) reportOnesided(w io.Writer) {
	kinds := []string{"put", "get", "signal", "atomic"}
	seen := false
	for _, rs := range js.ranks {
		seen = seen || rs != nil && len(rs.Layers.Onesided.Kinds) > 0
	}
	if !seen {
		return
	}
	fmt.Fprintln(w, "one-sided operations issued (count, bytes):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "rank\t")
	for _, k := range kinds {
		fmt.Fprintf(tw, "%s\t", k)
	}
	fmt.Fprintln(tw)
	for r, rs := range js.ranks {
		if rs == nil {
			continue
		}
		fmt.Fprintf(tw, "%d\t", r)
		for _, k := range kinds {
			c := rs.Layers.Onesided.Kinds[k]
			fmt.Fprintf(tw, "%d, %s\t", c.Ops, human(c.Bytes))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	matrix := make([][]uint64, js.size)
	for r, rs := range js.ranks {
		matrix[r] = make([]uint64, js.size)
		if rs == nil {
			continue
		}
		for _, pt := range rs.Layers.Onesided.Peers {
			if pt.Rank >= 0 && pt.Rank < js.size {
				matrix[r][pt.Rank] += pt.Bytes
			}
		}
	}
	writeMatrix(w, matrix, "one-sided bytes (row: origin, column: target)", "busiest of %d one-sided pairs (bytes)")
}

// reportAM writes, when the ranks counted active messages, a line per
// handler id: messages sent and handled and the bytes sent, over all
// ranks, the most sent first.
func (js *jobStats) reportAM(w io.Writer) {
	type line struct {
		id                   int
		sent, handled, bytes uint64
	}
	byID := map[int]*line{}
	for _, rs := range js.ranks {
		if rs == nil {
			continue
		}
		for k, c := range rs.Layers.AM {
			id, err := strconv.Atoi(k)
			if err != nil {
				continue
			}
			l := byID[id]
			if l == nil {
				l = &line{id: id}
				byID[id] = l
			}
			l.sent += c.Sent
			l.handled += c.Handled
			l.bytes += c.Bytes
		}
	}
	if len(byID) == 0 {
		return
	}
	lines := make([]*line, 0, len(byID))
	for _, l := range byID {
		lines = append(lines, l)
	}
	slices.SortFunc(lines, func(a, b *line) int {
		if c := cmp.Compare(b.sent, a.sent); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	fmt.Fprintln(w, "active messages per handler (over all ranks):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "handler\tsent\thandled\tbytes sent\t")
	for _, l := range lines {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t\n", l.id, l.sent, l.handled, human(l.bytes))
	}
	tw.Flush()
}

// dur writes nanoseconds as a duration rounded to 3 significant digits.
func dur(ns uint64) string {
	d := time.Duration(ns)
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond).String()
	}
	return d.String()
}

// writeCSV writes one line per rank, peer and transport: from, to,
// transport, messages, bytes; one-sided operations on lines of their
// own, transport "onesided", from the origin to the target, operations
// as messages.
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
		for _, pt := range rs.Layers.Onesided.Peers {
			if err := cw.Write([]string{strconv.Itoa(rs.Rank), strconv.Itoa(pt.Rank), "onesided",
				strconv.FormatUint(pt.Ops, 10), strconv.FormatUint(pt.Bytes, 10)}); err != nil {
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
		err := js.writeCSV(&b)
		if err == nil {
			err = os.WriteFile(*csvPath, []byte(b.String()), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "fabrun stats: %v\n", err)
			return 1
		}
	}
	return 0
}
