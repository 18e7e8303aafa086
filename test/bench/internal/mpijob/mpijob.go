// Package mpijob starts the jobs of the bench tools that run weft side by
// side with MPI implementations on one node (test/bench/p2p,
// test/bench/ddtpp): it finds MPICH and Open MPI, builds C programs with
// their compiler wrappers (with mpibench.h, a header of helpers the
// programs share), builds or checks fabrun and the command line of a weft
// job under it, and runs a job in a process group of its own under a time
// limit.
package mpijob

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Names are the MPI implementations Find knows, in the order the tools
// show them.
var Names = []string{"mpich", "openmpi"}

// An MPI is an MPI implementation found on this machine: its compiler
// wrapper and the launcher of its jobs.
type MPI struct {
	Name     string // mpich or openmpi
	compiler string
	launch   func(np int) []string
}

// Find looks for MPI implementation name (one of Names):
//
//	mpich    compiled with mpicc.mpich, run with mpiexec.hydra -launcher fork
//	openmpi  compiled with mpicc.openmpi, run with mpirun.openmpi
//	         --oversubscribe --mca pml ob1 --mca btl self,<its shared-memory
//	         BTL: vader up to 4.x, sm from 5.0 on>, as root if need be
//
// An implementation that is not installed is an error saying what is
// missing.
func Find(ctx context.Context, name string) (*MPI, error) {
	switch name {
	case "mpich":
		if err := lookPaths("mpicc.mpich", "mpiexec.hydra"); err != nil {
			return nil, err
		}
		return &MPI{Name: name, compiler: "mpicc.mpich", launch: func(np int) []string {
			return []string{"mpiexec.hydra", "-launcher", "fork", "-n", strconv.Itoa(np)}
		}}, nil
	case "openmpi":
		if err := lookPaths("mpicc.openmpi", "mpirun.openmpi", "ompi_info"); err != nil {
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
		return &MPI{Name: name, compiler: "mpicc.openmpi", launch: func(np int) []string {
			return []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", strconv.Itoa(np),
				"--mca", "pml", "ob1", "--mca", "btl", "self," + btl}
		}}, nil
	}
	return nil, fmt.Errorf("no MPI implementation %q (want one of %s)", name, strings.Join(Names, ", "))
}

func lookPaths(progs ...string) error {
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			return err
		}
	}
	return nil
}

// header is the C header of the tools' MPI programs: argument parsing and
// the timed ping-pong loop.
//
//go:embed mpibench.h
var header []byte

// Build compiles the C program src with m's compiler wrapper (-O2) into
// the executable dst; the source is written next to it as dst.c, and with
// it the header mpibench.h of this package (helpers the tools' programs
// share), which src may include as "mpibench.h".
func (m *MPI) Build(ctx context.Context, src []byte, dst string) error {
	c := dst + ".c"
	if err := os.WriteFile(filepath.Join(filepath.Dir(dst), "mpibench.h"), header, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(c, src, 0o600); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, m.compiler, "-O2", "-o", dst, c).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", m.compiler, filepath.Base(c), err, firstError(string(out)))
	}
	return nil
}

// firstError is the first line of out that says what failed — a
// compiler error or a linker's undefined reference — else its first
// line, saying how many lines more there were.
func firstError(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	first := 0
	for i, l := range lines {
		if strings.Contains(l, "error:") || strings.Contains(l, "undefined reference") {
			first = i
			break
		}
	}
	if len(lines) == 1 {
		return lines[0]
	}
	return fmt.Sprintf("%s (and %d more lines)", strings.TrimSpace(lines[first]), len(lines)-1)
}

// Launch is the command line that starts np ranks of the program (and its
// arguments) appended to it.
func (m *MPI) Launch(np int) []string { return m.launch(np) }

// A Program is a tool's MPI program built with one implementation.
type Program struct {
	*MPI
	Path string // the executable
}

// BuildAll builds src, tool's MPI program, with each implementation of
// names (Find) into dir as TOOL-NAME, in the order of names; one that is
// not installed or does not build is left out with a line on stderr
// saying why ("TOOL: NAME left out: ...").
func BuildAll(ctx context.Context, names []string, src []byte, dir, tool string, stderr io.Writer) []Program {
	var out []Program
	for _, name := range names {
		m, err := Find(ctx, name)
		if err == nil {
			prog := filepath.Join(dir, tool+"-"+name)
			if err = m.Build(ctx, src, prog); err == nil {
				out = append(out, Program{MPI: m, Path: prog})
				continue
			}
		}
		fmt.Fprintf(stderr, "%s: %s left out: %v\n", tool, name, err)
	}
	return out
}

// Fabrun returns the fabrun binary to launch weft jobs with: path, which
// must exist, or when path is empty cmd/fabrun built into dir (go build,
// from within the module).
func Fabrun(ctx context.Context, path, dir string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("fabrun: %w", err)
		}
		return path, nil
	}
	path = filepath.Join(dir, "fabrun")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/weft-hpc/weft/cmd/fabrun").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fabrun (or name one): %w\n%s", err, out)
	}
	return path, nil
}

// FabrunLaunch is the command line that starts np ranks of the program
// (and its arguments) appended to it as a weft job on this node: fabrun's
// local launcher over libfabric provider prov, each rank given the
// environment settings env (NAME=value), the whole job limited to timeout.
func FabrunLaunch(fabrun string, np int, prov string, timeout time.Duration, env []string) []string {
	argv := []string{fabrun, "-n", strconv.Itoa(np), "--launcher", "local", "--provider", prov, "--timeout", timeout.String()}
	for _, e := range env {
		argv = append(argv, "--env", e)
	}
	return argv
}

// A Weft starts weft jobs of this very command: fabrun's local launcher
// (FabrunLaunch) re-executing the running program as the job's ranks.
type Weft struct {
	fabrun, self, prov string
	timeout            time.Duration
}

// NewWeft finds the running program's executable and the fabrun binary
// (Fabrun: fabrun, or when empty cmd/fabrun built into dir) for jobs over
// libfabric provider prov, each limited to timeout.
func NewWeft(ctx context.Context, fabrun, dir, prov string, timeout time.Duration) (*Weft, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fabrun, err = Fabrun(ctx, fabrun, dir)
	if err != nil {
		return nil, err
	}
	return &Weft{fabrun: fabrun, self: self, prov: prov, timeout: timeout}, nil
}

// Launch is the command line that starts np ranks of the running program,
// each given the environment settings env (NAME=value); the ranks' flags
// and arguments are appended to it.
func (w *Weft) Launch(np int, env []string) []string {
	return append(FabrunLaunch(w.fabrun, np, w.prov, w.timeout, env), w.self)
}

// Run runs argv in a process group of its own and returns its output
// (stdout and stderr together). A job that fails is an error carrying the
// output; one that outlives timeout, plus a grace (timeout again, at most
// 10 s) for a launcher given the same limit to end its ranks itself, has
// its whole process group killed and is an error too.
func Run(ctx context.Context, timeout time.Duration, argv []string) ([]byte, error) {
	return RunTee(ctx, timeout, argv, nil)
}

// RunTee is Run that also copies the job's output to tee (nil: none) as
// it comes, for a job that reports progress.
func RunTee(ctx context.Context, timeout time.Duration, argv []string, tee io.Writer) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("mpijob: empty command line")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+min(timeout, 10*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if tee != nil {
		w := io.MultiWriter(&out, tee)
		cmd.Stdout, cmd.Stderr = w, w
	}
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

// Rotate returns s starting at element k mod len(s), so that no contender
// of a tool always runs first.
func Rotate[T any](s []T, k int) []T {
	if len(s) == 0 {
		return nil
	}
	k %= len(s)
	return append(append([]T(nil), s[k:]...), s[:k]...)
}
