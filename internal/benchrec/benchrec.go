// Package benchrec is the record every bench tool writes with -json
// (pingpong, endpoint, onesided, onesided/overlap, p2p, ddtpp, osu, and ddtbench's lines
// converted by the dashboard) and test/bench/dashboard reads.
package benchrec

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/weft-hpc/weft/internal/wait"
)

// Record is one -json output line: one measured figure of one case.
type Record struct {
	Tool     string  `json:"tool"`                // the command: pingpong, endpoint, onesided, overlap, p2p, ddtpp, osu
	Area     string  `json:"area"`                // the area measured: fabric, endpoint, onesided, p2p, collectives
	Case     string  `json:"case"`                // what ran, e.g. batch, inproc-g2, weft-shm, put
	Size     string  `json:"size,omitempty"`      // message bytes, or the case's size label
	Bytes    int64   `json:"bytes,omitempty"`     // message bytes where Size is a label (ddtpp)
	Metric   string  `json:"metric"`              // lat, bw, msgrate, ps_lat, efficiency, ...
	Value    float64 `json:"value"`               // the median of our figure over Reps
	Unit     string  `json:"unit,omitempty"`      // us, MB/s, msg/s, ms, or empty for a ratio
	Ref      string  `json:"ref,omitempty"`       // what Value is compared with, run side by side
	RefValue float64 `json:"ref_value,omitempty"` // the reference's median over Reps
	Ratio    float64 `json:"ratio,omitempty"`     // median over repetitions of Value ÷ RefValue taken in the same repetition
	Reps     int     `json:"reps"`                // repetitions the medians are over
	Stat     string  `json:"stat"`                // how Value was reduced: median
	Commit   string  `json:"commit,omitempty"`    // the build's VCS revision (+dirty)
	Machine  string  `json:"machine,omitempty"`   // CPU model and count
	Go       string  `json:"go,omitempty"`        // Go release
	Note     string  `json:"note,omitempty"`      // provenance, e.g. transcribed figures
	Runs     int     `json:"runs,omitempty"`      // runs merged into this record by the dashboard (a tool's line: absent)
}

// Finite maps NaN and ±Inf (not representable in JSON) to 0, which the
// omitempty fields leave out.
func Finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// Write fills each record's build and machine fields and writes
// the records as JSON lines.
func Write(w io.Writer, rs []Record) error {
	commit, machine, goVer := buildCommit(), machineName(), runtime.Version()
	enc := json.NewEncoder(w)
	for _, r := range rs {
		r.Value, r.RefValue, r.Ratio = Finite(r.Value), Finite(r.RefValue), Finite(r.Ratio)
		if r.Stat == "" {
			r.Stat = "median"
		}
		r.Commit, r.Machine, r.Go = commit, machine, goVer
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// buildCommit is WEFT_BENCH_COMMIT, or the revision go build stamped into
// the binary (empty under go run).
func buildCommit() string {
	if c := os.Getenv("WEFT_BENCH_COMMIT"); c != "" {
		return c
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
}

// machineName is the first CPU model in /proc/cpuinfo and the machine's
// CPU count (wait.NodeCPUs: a rank that fabrun bound to one CPU still
// names the machine).
func machineName() string {
	model := runtime.GOARCH
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs", model, wait.NodeCPUs())
}

// Key identifies a result across runs: tool/case/size/metric.
func (r Record) Key() string {
	return strings.Join([]string{r.Tool, r.Case, r.Size, r.Metric}, "/")
}

// DDTResult is one line of ddtbench -json: one engine packing or unpacking
// one layout at one size. The dashboard turns these into Records.
type DDTResult struct {
	Case      string  `json:"case"`
	Size      string  `json:"size"`
	Bytes     int64   `json:"bytes"`
	Engine    string  `json:"engine"`
	Op        string  `json:"op"`
	NS        float64 `json:"ns"`
	CompileNS int64   `json:"compile_ns,omitempty"`
}
