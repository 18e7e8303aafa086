package sidebyside

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
)

// ErrUsage marks a bad command line.
var ErrUsage = errors.New("usage")

// ExitCode is the exit status of a tool that ends with err: 2 for a bad
// command line (ErrUsage), 1 for any other error, 0 for none.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	}
	return 1
}

// A CLI is the command line of a side-by-side tool: the flags every such
// tool takes, and the tool's own, which it registers on the embedded
// FlagSet.
type CLI struct {
	*flag.FlagSet
	Role    string        // -role: the weft job's rank role, when this command is one
	Reps    int           // -reps: repetitions
	Fabrun  string        // -fabrun: the fabrun binary, "" to build one
	Timeout time.Duration // -timeout: the limit per job
	JSON    bool          // -json: benchrec records on stdout, the tables on stderr
}

// NewCLI is the command line of tool name, with -role (described by
// roleUsage), -reps (default 5), -fabrun, -timeout (default timeout) and
// -json; usage messages go to stderr.
func NewCLI(name, roleUsage string, timeout time.Duration, stderr io.Writer) *CLI {
	c := &CLI{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.SetOutput(stderr)
	c.StringVar(&c.Role, "role", "", roleUsage)
	c.IntVar(&c.Reps, "reps", 5, "repetitions; medians are reported")
	c.StringVar(&c.Fabrun, "fabrun", "", "fabrun binary (default: go build ./cmd/fabrun into a temporary directory)")
	c.DurationVar(&c.Timeout, "timeout", timeout, "limit per job")
	c.BoolVar(&c.JSON, "json", false, "print benchrec records (JSON lines) on stdout, the tables on stderr")
	return c
}

// Parse parses args; a bad command line is an ErrUsage error.
func (c *CLI) Parse(args []string) error {
	if err := c.FlagSet.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}

// Check checks the driver's command line (not a rank's, which takes
// arguments), in this order: no argument is left over, check (the tool's
// own checks of its flags) passes, and -timeout is positive. Each failure
// is an ErrUsage error.
func (c *CLI) Check(check func() error) error {
	if c.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", ErrUsage, c.Args())
	}
	if err := check(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("%w: -timeout %v: want > 0", ErrUsage, c.Timeout)
	}
	return nil
}

// List splits a comma-separated flag value, dropping empty fields.
func List(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ItersFor is the number of timed round trips of a message of bytes: base
// up to 4 KiB, scaled down in proportion above so that every size moves
// about as many bytes, and at least floor.
func ItersFor(base, floor int, bytes int64) int {
	n := base
	if bytes > 4096 {
		n = int(int64(base) * 4096 / bytes)
	}
	return max(n, floor)
}

// RoleArgs reads a weft rank's arguments (-role ROLE ARG...) as
// non-negative integers; anything else is an ErrUsage error.
func RoleArgs(role string, args []string) ([]int, error) {
	nums := make([]int, len(args))
	for i, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: -role %s: argument %q is not a non-negative integer", ErrUsage, role, a)
		}
		nums[i] = n
	}
	return nums, nil
}

// WarmupFor is the untimed part before n timed iterations: a tenth, at
// least one.
func WarmupFor(n int) int { return max(n/10, 1) }

// Output writes a tool's results: the tables (print) on stdout, or, with
// jsonOut, the records as benchrec JSON lines on stdout and the tables on
// stderr for the log of the run.
func Output(jsonOut bool, stdout, stderr io.Writer, print func(io.Writer), records func() []benchrec.Record) error {
	if jsonOut {
		print(stderr)
		return benchrec.Write(stdout, records())
	}
	print(stdout)
	return nil
}

// Sizes reads a comma-separated -sizes list of byte counts, each with an
// optional k (KiB) or m (MiB) suffix, from 1 to limit bytes.
func Sizes(s string, limit int) ([]int, error) {
	var out []int
	for _, f := range List(s) {
		g := strings.ToLower(f)
		mult := 1
		switch {
		case strings.HasSuffix(g, "k"):
			mult, g = 1<<10, g[:len(g)-1]
		case strings.HasSuffix(g, "m"):
			mult, g = 1<<20, g[:len(g)-1]
		}
		n, err := strconv.Atoi(g)
		if err != nil || n <= 0 || n > limit/mult {
			return nil, fmt.Errorf("-sizes: bad size %q (want 1 to %d bytes, k and m suffixes)", f, limit)
		}
		out = append(out, n*mult)
	}
	return out, nil
}
