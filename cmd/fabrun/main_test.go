package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/bootstrap"
	"github.com/weft-hpc/weft/internal/proctest"
)

var bins = proctest.NewBuilder("github.com/weft-hpc/weft/cmd/fabrun",
	"github.com/weft-hpc/weft/cmd/fabrun/fabrun-info", "github.com/weft-hpc/weft/examples/hello")

// binaries builds fabrun, fabrun-info and examples/hello once per test run.
func binaries(t testing.TB) (fabrun, hello string) {
	t.Helper()
	return bins.Path(t, "fabrun"), bins.Path(t, "hello")
}

func TestMain(m *testing.M) {
	switch os.Getenv("WEFT_FABRUN_TEST_RANK") {
	case "vanish":
		os.Exit(vanishRank())
	case "hang":
		os.Exit(hangRank())
	case "stats":
		os.Exit(statsRank())
	}
	code := m.Run()
	bins.Close()
	os.Exit(code)
}

// vanishRank is a rank of TestExitWithoutFinalize: every rank trades a
// value through PMI; rank 1 then exits 0 without finalize while the others
// wait on something other than PMI (as in a receive from rank 1).
func vanishRank() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := bootstrap.Init(ctx)
	if err == nil {
		err = b.Put("r"+strconv.Itoa(b.Rank()), []byte("x"))
	}
	if err == nil {
		err = b.Fence(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rank:", err)
		return 2
	}
	if b.Rank() == 1 {
		return 0
	}
	<-ctx.Done()
	fmt.Println("waited in vain")
	return 0
}

type result = proctest.Result

// runFabrun runs the fabrun binary with args, extra environment and stdin,
// with local ranks even when the tests run inside a Slurm allocation.
func runFabrun(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	fab, _ := binaries(t)
	return proctest.Run(t, 60*time.Second, append([]string{"WEFT_LAUNCHER=local"}, env...), stdin, fab, args...)
}

func TestHelloShm(t *testing.T) {
	_, hello := binaries(t)
	host, _ := os.Hostname()
	r := runFabrun(t, nil, "", "-n", "4", "--provider", "shm", "--tag-output", hello)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for rank := range 4 {
		want := fmt.Sprintf("[%d] rank %d of 4 on %s: ring ok\n", rank, rank, host)
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("missing %q in:\n%s", want, r.Stdout)
		}
	}
}

// TestMPMD: one job of two programs — hello and hello again, with
// different environments — makes one ring of three ranks; the second
// program's ranks know their program's number.
func TestMPMD(t *testing.T) {
	_, hello := binaries(t)
	host, _ := os.Hostname()
	r := runFabrun(t, nil, "", "-n", "1", "--tag-output", "--env", "G=1", hello, ":", "-n", "2", "--env", "WEFT_PROVIDER=shm", hello)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for rank, suffix := range []string{"", ", program 1", ", program 1"} {
		want := fmt.Sprintf("[%d] rank %d of 3 on %s: ring ok%s\n", rank, rank, host, suffix)
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("missing %q in:\n%s", want, r.Stdout)
		}
	}
	r = runFabrun(t, []string{"X=0"}, "", "-n", "2", "--tag-output", "--env", "G=g", "sh", "-c", `echo "A $WEFT_APPNUM $G $X"`,
		":", "-n", "1", "--env", "X=1", "sh", "-c", `echo "B $WEFT_APPNUM $G $X"`)
	for _, want := range []string{"[0] A 0 g 0\n", "[1] A 0 g 0\n", "[2] B 1 g 1\n"} {
		if r.Code != 0 || !strings.Contains(r.Stdout, want) {
			t.Errorf("exit %d, missing %q in:\n%s%s", r.Code, want, r.Stdout, r.Stderr)
		}
	}
}

// TestPPNAndWdir: --ppn replaces the hosts' slots (and sets the size
// when -n is not given); --wdir, or WEFT_WDIR, is where the ranks run.
func TestPPNAndWdir(t *testing.T) {
	getenv := func(string) string { return "" }
	o, err := parse([]string{"--hosts", "a:1,b:5", "--ppn", "3", "true"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NP != 6 || len(cfg.Hosts) != 2 || cfg.Hosts[0].Slots != 3 || cfg.Hosts[1].Slots != 3 {
		t.Errorf("--hosts a:1,b:5 --ppn 3: %d ranks on %v", cfg.NP, cfg.Hosts)
	}
	slurm := func(k string) string {
		if k == "SLURM_JOB_ID" {
			return "7"
		}
		return ""
	}
	if o, err = parse([]string{"-n", "4", "--ppn", "2", "true"}, slurm, io.Discard); err == nil {
		cfg, err = o.config(slurm)
	}
	if err != nil || !slices.Contains(cfg.Srun, "--ntasks-per-node=2") {
		t.Errorf("--ppn 2 in a Slurm allocation: srun %v, %v", cfg.Srun, err)
	}
	dir := t.TempDir()
	r := runFabrun(t, nil, "", "-n", "2", "--tag-output", "--wdir", dir, "pwd")
	if r.Code != 0 || strings.Count(r.Stdout, dir+"\n") != 2 {
		t.Errorf("--wdir %s: exit %d\n%s%s", dir, r.Code, r.Stdout, r.Stderr)
	}
	r = runFabrun(t, []string{"WEFT_WDIR=" + dir}, "", "-n", "1", "pwd")
	if r.Code != 0 || r.Stdout != dir+"\n" {
		t.Errorf("WEFT_WDIR=%s: exit %d\n%s%s", dir, r.Code, r.Stdout, r.Stderr)
	}
}

func TestHelloTCP(t *testing.T) {
	_, hello := binaries(t)
	r := runFabrun(t, nil, "", "-n", "3", "--provider", "tcp;ofi_rxm", hello)
	if r.Code != 0 || strings.Count(r.Stdout, "ring ok") != 3 {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestFailFast is the acceptance check: rank 1 exits 3, the others
// are killed at once, fabrun exits 3 within ~2 s and no sleep survives.
func TestFailFast(t *testing.T) {
	mark := proctest.Marker()
	r := runFabrun(t, nil, "", "-n", "3", "--env", mark, "sh", "-c", `[ "$PMI_RANK" = 1 ] && exit 3; sleep 30`)
	if r.Code != 3 {
		t.Fatalf("exit %d, want 3\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "fabrun: rank 1 exited with status 3") {
		t.Errorf("stderr does not name the rank:\n%s", r.Stderr)
	}
	if r.Took > 3*time.Second {
		t.Errorf("took %v", r.Took)
	}
	if left := proctest.Marked(mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// TestExitWithoutFinalize: rank 1 exits 0 without PMI finalize while the
// others block outside PMI; fabrun ends the job at once, names the rank and
// exits non-zero, leaving nothing behind.
func TestExitWithoutFinalize(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mark := proctest.Marker()
	r := runFabrun(t, []string{"WEFT_FABRUN_TEST_RANK=vanish"}, "", "-n", "3", "--timeout", "30s", "--env", mark, self)
	if r.Code != 1 || !strings.Contains(r.Stderr, "fabrun: rank 1 exited without PMI finalize") {
		t.Fatalf("exit %d after %v, want 1 and the rank named\n%s%s", r.Code, r.Took, r.Stdout, r.Stderr)
	}
	if r.Took > 5*time.Second || strings.Contains(r.Stdout, "waited in vain") {
		t.Errorf("took %v\n%s", r.Took, r.Stdout)
	}
	if left := proctest.WaitGone(mark, 3*time.Second); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestTimeoutFlagAndEnv(t *testing.T) {
	mark := proctest.Marker()
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"-n", "2", "--timeout", "400ms", "--env", mark, "sleep", "30"}},
		{[]string{"WEFT_TIMEOUT=400ms", "WEFT_NP=2", mark}, []string{"sleep", "30"}},
	} {
		r := runFabrun(t, c.env, "", c.args...)
		if r.Code != 124 || !strings.Contains(r.Stderr, "timed out after 400ms") {
			t.Errorf("%v %v: exit %d\n%s", c.env, c.args, r.Code, r.Stderr)
		}
		if r.Took > 3*time.Second {
			t.Errorf("took %v", r.Took)
		}
	}
	if left := proctest.Marked(mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		code int
		msg  string
	}{
		{nil, []string{"--no-such-flag", "-n", "2", "true"}, 2, "flag provided but not defined: -no-such-flag"},
		{nil, []string{"-n", "0", "true"}, 2, "number of ranks must be positive"},
		{nil, []string{"-n", "-3", "true"}, 2, "number of ranks must be positive"},
		{nil, []string{"-n", "2"}, 2, "no program given"},
		{nil, []string{"-n", "2", "/no/such/program"}, 127, `program "/no/such/program"`},
		{nil, []string{"-n", "2", "no-such-program-weft"}, 127, "executable file not found"},
		{nil, []string{"-n", "2", "--launcher", "pbs", "true"}, 2, `unknown launcher "pbs"`},
		{nil, []string{"-n", "2", "--env", "NOEQ", "true"}, 2, `"NOEQ" is not KEY=VALUE`},
		{nil, []string{"-n", "2", "--hosts", "a:0", "true"}, 2, "slots must be a positive integer"},
		{nil, []string{"-n", "2", "--hostfile", "/no/such/file", "true"}, 2, "no such file"},
		{[]string{"WEFT_TIMEOUT=soon"}, []string{"-n", "2", "true"}, 2, `WEFT_TIMEOUT="soon" is not a duration`},
		{[]string{"WEFT_NP=x"}, []string{"true"}, 2, `WEFT_NP="x" is not an integer`},
		{[]string{"WEFT_TIMEOUT_STACKS=maybe"}, []string{"-n", "2", "true"}, 2, `WEFT_TIMEOUT_STACKS="maybe" is not a boolean`},
		{nil, []string{"-n", "1", "true", ":", "true"}, 2, "program 2 after ':': the number of ranks must be positive"},
		{nil, []string{"-n", "1", "true", ":", "-n", "2"}, 2, "program 2 after ':': no program given"},
		{nil, []string{"-n", "1", ":", "-n", "2", "true"}, 2, "no program given"},
		{nil, []string{"true", ":", "-n", "2", "true"}, 2, "the first program of an MPMD job needs its -n"},
		{nil, []string{"-n", "1", "true", ":", "-n", "1", "--env", "X", "true"}, 2, `"X" is not KEY=VALUE`},
		{[]string{"SLURM_JOB_ID="}, []string{"-n", "2", "--ppn", "2", "true"}, 2, "--ppn needs hosts"},
		{nil, []string{"-n", "2", "--hosts", "a", "--ppn", "-1", "true"}, 2, "--ppn must be positive"},
		{nil, []string{"-n", "2", "--wdir", "/no/such/dir", "true"}, 2, `working directory "/no/such/dir" is not a directory`},
		{[]string{"WEFT_PPN=x"}, []string{"-n", "2", "true"}, 2, `WEFT_PPN="x" is not an integer`},
		{nil, []string{"-n", "1", "--output-dir", "/proc/no/such", "true"}, 2, "output directory"},
	} {
		r := runFabrun(t, c.env, "", c.args...)
		if r.Code != c.code || !strings.Contains(r.Stderr, c.msg) {
			t.Errorf("fabrun %v (env %v): exit %d, want %d with %q; stderr:\n%s", c.args, c.env, r.Code, c.code, c.msg, r.Stderr)
		}
	}
}

func TestEnvDefaultsAndHostfile(t *testing.T) {
	r := runFabrun(t, []string{"WEFT_NP=3", "WEFT_TAG_OUTPUT=1", "WEFT_PROVIDER=sockets"}, "", "sh", "-c", `echo "$PMI_RANK $WEFT_PROVIDER"`)
	for rank := range 3 {
		if want := fmt.Sprintf("[%d] %d sockets\n", rank, rank); !strings.Contains(r.Stdout, want) {
			t.Errorf("missing %q in:\n%s%s", want, r.Stdout, r.Stderr)
		}
	}
	hf := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hf, []byte("# two slots here\nlocalhost slots=2\n"), 0o644)
	r = runFabrun(t, nil, "", "--hostfile", hf, "sh", "-c", `echo "$PMI_RANK/$PMI_SIZE local $WEFT_LOCAL_RANK/$WEFT_LOCAL_SIZE"`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "1/2 local 1/2") || !strings.Contains(r.Stdout, "0/2 local 0/2") {
		t.Errorf("hostfile job: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

func TestStdinToRankZero(t *testing.T) {
	r := runFabrun(t, nil, "ping\n", "-n", "2", "--tag-output", "sh", "-c", `read -r l; echo "got [$l]"`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "[0] got [ping]") || !strings.Contains(r.Stdout, "[1] got []") {
		t.Errorf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

func TestSignalForwarded(t *testing.T) {
	fab, _ := binaries(t)
	mark := proctest.Marker()
	cmd := exec.Command(fab, "-n", "3", "--launcher", "local", "--tag-output", "sh", "-c", `echo up; sleep 30`)
	cmd.Env = append(os.Environ(), mark)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(10 * time.Second)
	for len(proctest.Marked(mark)) < 7 && time.Now().Before(deadline) { // fabrun + 3 sh + 3 sleep
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("fabrun after SIGTERM: %v\n%s", err, se.String())
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v", took)
	}
	if !strings.Contains(se.String(), "killed by signal 15") {
		t.Errorf("stderr:\n%s", se.String())
	}
	if left := proctest.Marked(mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestInfo(t *testing.T) {
	r := runFabrun(t, nil, "", "info")
	if r.Code != 0 || !strings.Contains(r.Stdout, "libfabric providers") || !strings.Contains(r.Stdout, "RDMA devices") {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "  shm (") {
		t.Errorf("shm not listed:\n%s", r.Stdout)
	}
	r = runFabrun(t, nil, "", "info", "--provider", "no-such-provider")
	if r.Code == 0 || !strings.Contains(r.Stderr, "fabrun info:") {
		t.Errorf("unknown provider: exit %d\n%s", r.Code, r.Stderr)
	}
	r = runFabrun(t, []string{"WEFT_FABRUN_INFO=/no/such/fabrun-info"}, "", "info")
	if r.Code == 0 || !strings.Contains(r.Stderr, "fabrun info:") {
		t.Errorf("missing fabrun-info: exit %d\n%s", r.Code, r.Stderr)
	}
}
