package main

import (
	"bytes"
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
	"syscall"
	"time"

	"github.com/weft-hpc/weft/test/bench/internal/fipingpong"
)

//go:embed mpi/pingpong.c
var mpiPingpong []byte

//go:embed mpi/msgrate.c
var mpiMsgrate []byte

// Kinds of contender.
const (
	kindWeft = iota
	kindFI
	kindMPI
)

// A contender is one column: a weft transport, fi_pingpong or an MPI.
type contender struct {
	name string
	kind int
	env  []string // weft: the job's extra environment
	// MPI: the built programs.
	pingpong, msgrate string
	// launch is the argv that starts np ranks (weft: of this command, to
	// which the role's arguments are appended; MPI: of the program that
	// follows).
	launch func(np int) []string
}

// runs reports whether c takes part in a measurement: ping-pong (rate
// "") or a rate case.
func (c *contender) runs(rate string) bool {
	switch {
	case rate == "":
		return true
	case c.kind == kindFI:
		return false
	case c.kind == kindMPI:
		return rate != "2ep"
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
	// The MPIs' 2-sender rate is 2ep's reference even when case 2 is not
	// asked for.
	rateLabels := []string{}
	for _, l := range []string{"1", "2", "2ep"} {
		if slices.Contains(cfg.rates, l) || (l == "2" && slices.Contains(cfg.rates, "2ep")) {
			rateLabels = append(rateLabels, l)
		}
	}
	for rep := range cfg.reps {
		for _, size := range cfg.sizes {
			line := fmt.Sprintf("rep %d size %d:", rep+1, size)
			for _, c := range rotate(cs, rep) {
				if !c.runs("") {
					continue
				}
				lat, bw, err := pingpong(ctx, cfg, c, size)
				if err != nil {
					return fmt.Errorf("rep %d, %s ping-pong %d B: %w", rep+1, c.name, size, err)
				}
				res.add(c.name, "lat", strconv.Itoa(size), rep, lat)
				res.add(c.name, "bw", strconv.Itoa(size), rep, bw)
				line += fmt.Sprintf(" %s %.3f us %.1f MB/s,", c.name, lat, bw)
			}
			fmt.Fprintln(stderr, strings.TrimSuffix(line, ","))
		}
		for _, l := range rateLabels {
			line := fmt.Sprintf("rep %d rate %s:", rep+1, l)
			for _, c := range rotate(cs, rep) {
				if !c.runs(l) || (l == "2" && c.kind == kindWeft && !slices.Contains(cfg.rates, "2")) {
					continue
				}
				v, err := msgrate(ctx, cfg, c, l)
				if err != nil {
					return fmt.Errorf("rep %d, %s rate case %s: %w", rep+1, c.name, l, err)
				}
				res.add(c.name, "msgrate", l, rep, v)
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
		}
	}
	if cfg.jsonOut {
		rep.print(stderr) // the tables, for the log of a -json run
		return writeRecords(stdout, rep.records())
	}
	rep.print(stdout)
	return nil
}

// rotate returns cs starting at element rep mod len(cs), so that no
// contender always runs first.
func rotate(cs []*contender, rep int) []*contender {
	k := rep % len(cs)
	return append(append([]*contender(nil), cs[k:]...), cs[:k]...)
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
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		fabrun := cfg.fabrun
		if fabrun == "" {
			fabrun = filepath.Join(tmp, "fabrun")
			out, err := exec.CommandContext(ctx, "go", "build", "-o", fabrun, "github.com/weft-hpc/weft/cmd/fabrun").CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("building fabrun (or give -fabrun): %w\n%s", err, out)
			}
		} else if _, err := os.Stat(fabrun); err != nil {
			return nil, fmt.Errorf("-fabrun: %w", err)
		}
		for _, v := range cfg.weft {
			c := &contender{name: weftColumn(v), kind: kindWeft, env: []string{"WEFT_NODE_TRANSPORT=" + v}}
			c.launch = func(np int) []string {
				argv := []string{fabrun, "-n", strconv.Itoa(np), "--launcher", "local", "--provider", cfg.provider,
					"--timeout", cfg.timeout.String()}
				for _, e := range c.env {
					argv = append(argv, "--env", e)
				}
				return append(argv, self)
			}
			cs = append(cs, c)
		}
	}
	for _, r := range cfg.refs {
		var c *contender
		var err error
		switch r {
		case "fi_pingpong":
			if len(cfg.sizes) == 0 {
				continue
			}
			if _, err = exec.LookPath(cfg.fiPath); err == nil {
				c = &contender{name: r, kind: kindFI}
			}
		case "mpich":
			c, err = buildMPI(ctx, tmp, r, "mpicc.mpich", "mpiexec.hydra", func(np int) []string {
				return []string{"mpiexec.hydra", "-launcher", "fork", "-n", strconv.Itoa(np)}
			})
		case "openmpi":
			c, err = buildOpenMPI(ctx, tmp)
		}
		if err != nil || c == nil {
			fmt.Fprintf(stderr, "p2p: %s left out: %v\n", r, err)
			continue
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// buildMPI compiles the MPI programs with compiler into tmp for the
// contender name launched by launcher (the first word of launch's argv).
func buildMPI(ctx context.Context, tmp, name, compiler, launcher string, launch func(np int) []string) (*contender, error) {
	for _, p := range []string{compiler, launcher} {
		if _, err := exec.LookPath(p); err != nil {
			return nil, err
		}
	}
	c := &contender{name: name, kind: kindMPI, launch: launch}
	for _, prog := range []struct {
		src  []byte
		name string
		dst  *string
	}{{mpiPingpong, "pingpong", &c.pingpong}, {mpiMsgrate, "msgrate", &c.msgrate}} {
		src := filepath.Join(tmp, name+"-"+prog.name+".c")
		if err := os.WriteFile(src, prog.src, 0o600); err != nil {
			return nil, err
		}
		*prog.dst = filepath.Join(tmp, name+"-"+prog.name)
		if out, err := exec.CommandContext(ctx, compiler, "-O2", "-o", *prog.dst, src).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s %s: %w\n%s", compiler, prog.name, err, out)
		}
	}
	return c, nil
}

// buildOpenMPI builds the programs with Open MPI's compiler and launches
// them on its shared-memory transport: pml ob1 with the self and
// shared-memory BTLs (vader up to 4.x, sm from 5.0), oversubscribing the
// cores for the 4-rank case, as root if need be.
func buildOpenMPI(ctx context.Context, tmp string) (*contender, error) {
	if _, err := exec.LookPath("ompi_info"); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, "ompi_info", "--parsable").Output()
	if err != nil {
		return nil, fmt.Errorf("ompi_info: %w", err)
	}
	btl := ""
	for _, b := range []string{"vader", "sm"} {
		if bytes.Contains(out, []byte("mca:btl:"+b+":")) {
			btl = b
			break
		}
	}
	if btl == "" {
		return nil, errors.New("ompi_info lists no shared-memory BTL (vader or sm)")
	}
	return buildMPI(ctx, tmp, "openmpi", "mpicc.openmpi", "mpirun.openmpi", func(np int) []string {
		return []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", strconv.Itoa(np),
			"--mca", "pml", "ob1", "--mca", "btl", "self," + btl}
	})
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
	args := []string{strconv.Itoa(n), strconv.Itoa(warmupFor(n)), strconv.Itoa(size)}
	var argv []string
	if c.kind == kindWeft {
		argv = append(append(c.launch(2), "-role", "pingpong"), args...)
	} else {
		argv = append(append(c.launch(2), c.pingpong), args...)
	}
	out, err := runJob(ctx, cfg.timeout, argv)
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
	np, handles := 2, 1
	switch l {
	case "2":
		np = 4
	case "2ep":
		handles = 2
	}
	args := []string{strconv.Itoa(cfg.window), strconv.Itoa(cfg.windows), strconv.Itoa(warmupFor(cfg.windows)), strconv.Itoa(cfg.msgSize)}
	var argv []string
	if c.kind == kindWeft {
		argv = append(append(append(c.launch(np), "-role", "msgrate"), args...), strconv.Itoa(handles))
	} else {
		argv = append(append(c.launch(np), c.msgrate), args...)
	}
	out, err := runJob(ctx, cfg.timeout, argv)
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

// runJob runs argv in a process group of its own and returns its output
// (stdout and stderr); a job that fails or outlives timeout (its whole
// process group is then killed) is an error carrying the output.
func runJob(ctx context.Context, timeout time.Duration, argv []string) ([]byte, error) {
	// fabrun gets -timeout itself; the grace lets it end its ranks first.
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: no end after %v, killed: %s", strings.Join(argv, " "), timeout, out.Bytes())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out.Bytes())
	}
	return out.Bytes(), nil
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
