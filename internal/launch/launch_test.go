package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/bootstrap"
	"github.com/weft-hpc/weft/internal/nodeseg"
	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// TestMain doubles as a rank program: with WEFT_LAUNCH_HELPER set, the test
// binary acts as one rank instead of running tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("WEFT_LAUNCH_HELPER"); mode == "pgroup" {
		os.Exit(pgroupRank())
	} else if mode == "segment" {
		os.Exit(segmentRank())
	} else if mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is a real bootstrap client: it trades values with every rank.
func helper(mode string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := os.Getenv("WEFT_APPNUM")
	if mode == "appnum-pmi" {
		os.Unsetenv("WEFT_APPNUM") // the app number from PMI's get_appnum alone
	}
	b, err := bootstrap.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	me := b.Rank()
	switch mode {
	case "abort":
		if me == 1 {
			b.Abort(7, "rank one gives up")
			time.Sleep(30 * time.Second)
			return 0
		}
	case "leave":
		if me == 1 {
			return 0 // exits without finalize while rank 0 waits in the fence
		}
	case "failstacks":
		// Rank 1 fails after the fence; rank 0 waits for it in
		// waitOnFailedPeer, which its stacks must show.
		if err := b.Fence(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 2
		}
		if me == 1 {
			time.Sleep(time.Second) // rank 0 leaves the fence meanwhile
			return 3
		}
		waitOnFailedPeer(ctx)
		return 0
	case "vanish", "nofinalize":
		// Everyone trades a value; then rank 1 exits 0 without finalize.
		// In "vanish" rank 0 meanwhile waits for something other than PMI
		// (as it would in a receive from rank 1); in "nofinalize" it
		// finalizes and exits 0.
		if err := b.Fence(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 2
		}
		switch {
		case me == 1:
			return 0
		case mode == "vanish":
			<-ctx.Done()
			fmt.Println("rank 0 waited in vain")
			return 0
		}
		if err := b.Finalize(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 2
		}
		return 0
	}
	if err := b.Put("r."+strconv.Itoa(me), []byte{byte(me), 0, '\n', ' ', ';', '='}); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if err := b.Fence(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	sum := 0
	for r := range b.Size() {
		v, err := b.Get(ctx, "r."+strconv.Itoa(r))
		if err != nil || len(v) != 6 || int(v[0]) != r {
			fmt.Fprintln(os.Stderr, "helper: bad value", v, err)
			return 2
		}
		sum += int(v[0])
	}
	fmt.Printf("rank %d of %d (%s, local %d/%d) sum %d\n", me, b.Size(), b.Kind(), b.LocalRank(), b.LocalSize(), sum)
	if strings.HasPrefix(mode, "appnum") {
		fmt.Printf("rank %d: %s app %d (WEFT_APPNUM %q) %s\n", me, mode, b.(interface{ AppNum() int }).AppNum(), env, os.Args[len(os.Args)-1])
	}
	if err := b.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	return 0
}

// waitOnFailedPeer stands for a rank blocked on a peer that failed.
//
//go:noinline
func waitOnFailedPeer(ctx context.Context) { <-ctx.Done() }

func self(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// leftovers lists live processes whose process group is one of the job's.
func leftovers(j *Job) []string {
	groups := map[int]bool{}
	for _, p := range j.procs {
		groups[p.pgid] = true
	}
	var left []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err == nil && groups[pgid] {
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if !strings.Contains(string(stat), ") Z ") {
				left = append(left, string(stat))
			}
		}
	}
	return left
}

func TestLocalJobOutput(t *testing.T) {
	var out, errb proctest.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, Config{
		NP: 3, TagOutput: true, Stdout: &out, Stderr: &errb, Provider: "shm",
		Env:  []string{"GREETING=hi there"},
		Argv: []string{"sh", "-c", `echo "$GREETING rank $PMI_RANK of $PMI_SIZE local $WEFT_LOCAL_RANK/$WEFT_LOCAL_SIZE $WEFT_PROVIDER"; printf 'partial'; echo oops >&2`},
	})
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errb.String())
	}
	for r := range 3 {
		want := fmt.Sprintf("[%d] hi there rank %d of 3 local %d/3 shm\n", r, r, r)
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
		if !strings.Contains(out.String(), fmt.Sprintf("[%d] partial\n", r)) {
			t.Errorf("partial last line of rank %d missing:\n%s", r, out.String())
		}
		if !strings.Contains(errb.String(), fmt.Sprintf("[%d] oops\n", r)) {
			t.Errorf("stderr lacks rank %d:\n%s", r, errb.String())
		}
	}
}

func TestPMIJob(t *testing.T) {
	var out proctest.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := Run(ctx, Config{NP: 4, Stdout: &out, Stderr: &out, Argv: []string{self(t)}, Env: []string{"WEFT_LAUNCH_HELPER=ok"}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for r := range 4 {
		want := fmt.Sprintf("rank %d of 4 (fabrun, local %d/4) sum 6", r, r)
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestMPMD: a job of two programs (the same binary with different
// arguments and environments): ranks numbered app after app, each with
// its own program's environment, its app number from the environment and
// from PMI, and one PMI job across both.
func TestMPMD(t *testing.T) {
	for _, mode := range []string{"appnum", "appnum-pmi"} {
		var out proctest.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := Run(ctx, Config{Stdout: &out, Stderr: &out, Env: []string{"WEFT_LAUNCH_HELPER=" + mode}, Apps: []App{
			{NP: 1, Argv: []string{self(t), "-test.run", "^$", "first"}},
			{NP: 2, Argv: []string{self(t), "-test.run", "^$", "second"}, Env: []string{"WEFT_LAUNCH_HELPER=" + mode}},
		}})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out.String())
		}
		for r, want := range []string{"app 0 (WEFT_APPNUM \"0\") first", "app 1 (WEFT_APPNUM \"1\") second", "app 1 (WEFT_APPNUM \"1\") second"} {
			for _, w := range []string{fmt.Sprintf("rank %d of 3 (fabrun, local %d/3) sum 3", r, r), fmt.Sprintf("rank %d: %s %s", r, mode, want)} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("%s: output lacks %q:\n%s", mode, w, out.String())
				}
			}
		}
	}
	if err := (&Config{Apps: []App{{NP: 1, Argv: []string{"true"}}, {NP: 0, Argv: []string{"true"}}}}).validate(); !errors.Is(err, ErrUsage) {
		t.Errorf("an app of no ranks: %v", err)
	}
	if err := (&Config{Apps: []App{{NP: 1, Argv: []string{"true"}}, {NP: 1}}}).validate(); !errors.Is(err, ErrUsage) {
		t.Errorf("an app with no program: %v", err)
	}
}

// TestOutputDir: each rank's stdout and stderr land in files of its own,
// in a directory made for them, and nothing of theirs on fabrun's.
func TestOutputDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "job")
	var out proctest.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, Config{NP: 3, Stdout: &out, Stderr: &out, OutputDir: dir,
		Argv: []string{"sh", "-c", `echo "out $PMI_RANK"; echo "err $PMI_RANK" >&2`}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for r := range 3 {
		for ext, want := range map[string]string{".out": "out ", ".err": "err "} {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank.%d%s", r, ext)))
			if err != nil || string(b) != want+strconv.Itoa(r)+"\n" {
				t.Errorf("rank %d's %s file: %q, %v", r, ext, b, err)
			}
		}
	}
	if strings.Contains(out.String(), "out ") || strings.Contains(out.String(), "err ") {
		t.Errorf("rank output reached fabrun's writers:\n%s", out.String())
	}
	if err := (&Config{NP: 1, Argv: []string{"true"}, OutputDir: "/proc/no/such"}).validate(); !errors.Is(err, ErrUsage) {
		t.Errorf("an output directory that cannot be made: %v", err)
	}
}

func TestFailureKillsOthers(t *testing.T) {
	var out proctest.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	j, err := Start(ctx, Config{NP: 3, Stdout: &out, Stderr: &out,
		Argv: []string{"sh", "-c", `[ "$PMI_RANK" = 1 ] && exit 3; sleep 30`}})
	if err != nil {
		t.Fatal(err)
	}
	err = j.Wait()
	took := time.Since(start)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Rank != 1 || ee.Code != 3 {
		t.Fatalf("err = %v, want rank 1 exited with status 3", err)
	}
	if err.Error() != "rank 1 exited with status 3" {
		t.Errorf("message %q", err.Error())
	}
	if took > 5*time.Second {
		t.Errorf("job took %v to end after rank 1 failed", took)
	}
	if left := leftovers(j); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestKillAfterGrace(t *testing.T) {
	// Ranks that ignore SIGTERM are killed after KillGrace.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out proctest.Buffer
	start := time.Now()
	j, err := Start(ctx, Config{NP: 2, Stdout: &out, Stderr: &out, KillGrace: 300 * time.Millisecond,
		Argv: []string{"sh", "-c", `trap '' TERM; [ "$PMI_RANK" = 0 ] && { sleep 0.2; kill -9 $$; }; sleep 30 & wait; sleep 30`}})
	if err != nil {
		t.Fatal(err)
	}
	err = j.Wait()
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Rank != 0 || ee.Signal != syscall.SIGKILL || ee.Code != 137 {
		t.Fatalf("err = %v (%+v), want rank 0 killed by signal 9", err, ee)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	if left := leftovers(j); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	j, err := Start(ctx, Config{NP: 2, Timeout: 300 * time.Millisecond, Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	err = j.Wait()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 124 || ee.Rank != -1 {
		t.Errorf("exit error %+v", ee)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("timeout took %v", took)
	}
	if left := leftovers(j); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestSignalForwarding(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out proctest.Buffer
	j, err := Start(ctx, Config{NP: 2, Stdout: &out, TagOutput: true,
		Argv: []string{"sh", "-c", `trap 'echo got INT; exit 5' INT; echo ready; while :; do sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "ready") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	j.Signal(syscall.SIGINT)
	err = j.Wait()
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 5 {
		t.Fatalf("err = %v, want a rank exiting 5 from its INT trap\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "got INT") {
		t.Errorf("no rank saw SIGINT:\n%s", out.String())
	}
}

func TestStdinToRankZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out proctest.Buffer
	err := Run(ctx, Config{NP: 3, Stdout: &out, TagOutput: true, Stdin: strings.NewReader("line one\nline two\n"),
		Argv: []string{"sh", "-c", `while read -r l; do echo "got $l"; done; echo eof`}})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"[0] got line one\n", "[0] got line two\n", "[1] eof\n", "[2] eof\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "[1] got") || strings.Contains(got, "[2] got") {
		t.Errorf("stdin reached a rank other than 0:\n%s", got)
	}
}

func TestAbortAndStall(t *testing.T) {
	for _, c := range []struct {
		mode   string
		code   int
		reason string
	}{
		{"abort", 7, "rank 1 called abort with status 7: rank one gives up"},
		{"leave", 1, "rank 1 exited without PMI finalize"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out proctest.Buffer
		start := time.Now()
		err := Run(ctx, Config{NP: 2, Stdout: &out, Stderr: &out, Argv: []string{self(t)}, Env: []string{"WEFT_LAUNCH_HELPER=" + c.mode}})
		cancel()
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != c.code || !strings.HasPrefix(err.Error(), c.reason) {
			t.Errorf("%s: err = %v, want %q (code %d)\n%s", c.mode, err, c.reason, c.code, out.String())
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: took %v", c.mode, took)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []Config{
		{NP: 0, Argv: []string{"true"}},
		{NP: -1, Argv: []string{"true"}},
		{NP: 1},
		{NP: 1, Argv: []string{""}},
		{NP: 1, Argv: []string{"/nonexistent/prog"}},
		{NP: 1, Argv: []string{"no-such-program-weft"}},
		{NP: 1, Argv: []string{"true"}, Env: []string{"NOEQUALS"}},
		{NP: 1, Argv: []string{"true"}, Launcher: "pbs"},
		{NP: 1, Argv: []string{"true"}, Launcher: "ssh"},
		{NP: 1, Argv: []string{"true"}, Hosts: []Host{{Name: "a", Slots: 0}}},
		{NP: 1, Argv: []string{"true"}, Timeout: -time.Second},
		{NP: 1, Argv: []string{"true"}, Bind: "socket"},
		{NP: runtime.NumCPU() + 1, Argv: []string{"true"}, Bind: BindCore},
	} {
		if err := Run(ctx, c); err == nil {
			t.Errorf("Run(%+v) succeeded", c)
		} else {
			t.Logf("%+v: %v", c, err)
		}
	}
}

func TestPlacement(t *testing.T) {
	node, lrank, lsize, m := placement(5, []Host{{"a", 2}, {"b", 1}})
	// a:0,1  b:2  a:3,4 (wrap)
	wantNode := []int{0, 0, 1, 0, 0}
	wantL := []int{0, 1, 0, 2, 3}
	wantS := []int{4, 4, 1, 4, 4}
	for r := range 5 {
		if node[r] != wantNode[r] || lrank[r] != wantL[r] || lsize[r] != wantS[r] {
			t.Errorf("rank %d: node %d local %d/%d", r, node[r], lrank[r], lsize[r])
		}
	}
	if m != "(vector,(0,1,2),(1,1,1),(0,1,2))" {
		t.Errorf("mapping %s", m)
	}
	for r := range 5 {
		lr, ls, err := bootstrap.LocalFromMapping(m, r, 5)
		if err != nil || lr != wantL[r]%2 && ls == 2 {
			t.Errorf("rank %d: mapping gives %d/%d %v", r, lr, ls, err)
		}
	}
}

func TestChooseLauncher(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		name  string
		hosts []Host
		env   map[string]string
		want  string
	}{
		{"", nil, nil, "local"},
		{"auto", nil, map[string]string{"SLURM_JOB_ID": "5"}, "slurm"},
		{"auto", []Host{{"localhost", 2}}, nil, "local"},
		{"auto", []Host{{"node7.example", 2}}, nil, "ssh"},
		{"auto", []Host{{"root@127.0.0.1", 2}}, nil, "ssh"},
		{"local", []Host{{"node7", 2}}, nil, "local"},
	} {
		got, err := ChooseLauncher(c.name, c.hosts, env(c.env))
		if err != nil || got != c.want {
			t.Errorf("ChooseLauncher(%q, %v, %v) = %q, %v; want %q", c.name, c.hosts, c.env, got, err, c.want)
		}
	}
}

// TestExitWithoutFinalize: a rank that spoke PMI and exits 0 without
// finalize ends the job with an error naming it, whatever the other ranks
// are doing: waiting outside PMI ("vanish", as in a receive from the gone
// rank) or finishing normally ("nofinalize"). Other ranks are killed and
// nothing is left behind.
func TestExitWithoutFinalize(t *testing.T) {
	for _, mode := range []string{"vanish", "nofinalize"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out proctest.Buffer
			start := time.Now()
			j, err := Start(ctx, Config{NP: 3, Stdout: &out, Stderr: &out, Timeout: 10 * time.Second, Argv: []string{self(t)},
				Env: []string{"WEFT_LAUNCH_HELPER=" + mode}})
			if err != nil {
				t.Fatal(err)
			}
			err = j.Wait()
			took := time.Since(start)
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Rank != 1 || ee.Code != 1 || err.Error() != "rank 1 exited without PMI finalize" {
				t.Fatalf("err = %v (%+v), want rank 1 exited without PMI finalize\n%s", err, ee, out.String())
			}
			if took > 5*time.Second {
				t.Errorf("job took %v to end", took)
			}
			if strings.Contains(out.String(), "waited in vain") {
				t.Errorf("rank 0 was not ended:\n%s", out.String())
			}
			if left := leftovers(j); len(left) > 0 {
				t.Errorf("processes left behind: %v", left)
			}
		})
	}
}

// fakeSSH is an "ssh" that runs the remote command on this machine with
// sh, as sshd would: sh -c SCRIPT fakessh -o BatchMode=yes HOST COMMAND. Like
// a real ssh client it stays alive, with its arguments, while the command
// runs.
var fakeSSH = []string{"sh", "-c", `sh -c "$4"`, "fakessh"}

// localNonLoopback returns an IPv4 address of this machine that is not a
// loopback one: a host name fabrun treats as remote.
func localNonLoopback(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		testenv.Skip(t, "ipv4", "no interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	testenv.Skip(t, "ipv4", "no non-loopback IPv4 address on this machine")
	return ""
}

// TestSSHPathAddressAndSecret runs ssh-launched jobs (through fakeSSH) on a
// host named by a non-loopback address of this machine, so the job takes
// the remote path: the PMI server listens on that address, not on every
// interface; a real PMI job completes over it; and while ranks run, the job
// secret is in no process's command line.
func TestSSHPathAddressAndSecret(t *testing.T) {
	ip := localNonLoopback(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out proctest.Buffer
	j, err := Start(ctx, Config{NP: 2, Launcher: "ssh", Hosts: []Host{{Name: ip, Slots: 2}}, SSH: fakeSSH,
		Stdout: &out, Stderr: &out, Argv: []string{self(t)}, Env: []string{"WEFT_LAUNCH_HELPER=ok"}})
	if err != nil {
		t.Fatal(err)
	}
	addrs := j.pmiAddrs
	if err := j.Wait(); err != nil {
		t.Fatalf("PMI job over the ssh path: %v\n%s", err, out.String())
	}
	if strings.Count(out.String(), "(fabrun, local") != 2 {
		t.Errorf("ranks did not report:\n%s", out.String())
	}
	if len(addrs) != 1 {
		t.Fatalf("PMI listeners %v, want one", addrs)
	}
	host, _, _ := net.SplitHostPort(addrs[0])
	if hip := net.ParseIP(host); hip == nil || hip.IsUnspecified() || host != ip {
		t.Errorf("PMI server listens on %s, want %s (the address that routes to the host)", addrs[0], ip)
	}

	// The secret: ranks wait until released, the test looks at /proc.
	done := filepath.Join(t.TempDir(), "done")
	out = proctest.Buffer{}
	j, err = Start(ctx, Config{NP: 2, Launcher: "ssh", Hosts: []Host{{Name: ip, Slots: 2}}, SSH: fakeSSH, Stdout: &out, Stderr: &out,
		TagOutput: true, Argv: []string{"sh", "-c", `echo "secret:$WEFT_PMI_SECRET"; while [ ! -e "$1" ]; do sleep 0.02; done`, "rank", done}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { os.WriteFile(done, nil, 0o600); j.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), "secret:") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for r := range 2 {
		if want := fmt.Sprintf("[%d] secret:%s\n", r, j.secret); !strings.Contains(out.String(), want) {
			t.Errorf("rank %d did not get the job secret (want %q):\n%s", r, want, out.String())
		}
	}
	if leaks, seen := proctest.SecretExposed(j.secret); len(leaks) > 0 || seen == 0 {
		t.Errorf("job secret readable by other users in %v (found in %d owner-only files)", leaks, seen)
	}
	os.WriteFile(done, nil, 0o600)
	if err := j.Wait(); err != nil {
		t.Errorf("%v\n%s", err, out.String())
	}
}

func TestPMIAddresses(t *testing.T) {
	ip := func(s string) net.IP { return net.ParseIP(s) }
	lookup := func(name string) ([]net.IP, error) {
		switch name {
		case "node7":
			return []net.IP{ip("fd00::7"), ip("10.1.0.7")}, nil
		case "node8":
			return []net.IP{ip("10.2.0.8")}, nil
		case "head":
			return []net.IP{ip("10.1.0.1")}, nil
		case "any":
			return []net.IP{ip("0.0.0.0")}, nil
		}
		if h, _ := os.Hostname(); name == h {
			return []net.IP{ip("127.0.1.1"), ip("10.1.0.1")}, nil
		}
		return nil, errors.New("no such host")
	}
	route := func(dst net.IP) (net.IP, error) {
		switch dst.String() {
		case "10.1.0.7":
			return ip("10.1.0.1"), nil
		case "10.2.0.8":
			return ip("10.2.0.1"), nil
		}
		return nil, errors.New("unreachable")
	}
	self, _ := os.Hostname()
	for _, c := range []struct {
		hosts  []string
		pmi    string
		listen string
		dial   string
	}{
		{[]string{"localhost", "root@127.0.0.1"}, "", "127.0.0.1", "127.0.0.1 127.0.0.1"},
		{[]string{"user@node7", "node8", "localhost"}, "", "10.1.0.1 10.2.0.1 127.0.0.1", "10.1.0.1 10.2.0.1 127.0.0.1"},
		{[]string{"node7", "alias"}, "", "10.1.0.1", "10.1.0.1 " + self},
		{[]string{"node7", "node8"}, "head", "10.1.0.1", "head head"},
	} {
		var hosts []Host
		for _, h := range c.hosts {
			hosts = append(hosts, Host{Name: h, Slots: 1})
		}
		listen, dial, err := pmiAddresses(hosts, c.pmi, lookup, route)
		if err != nil {
			t.Errorf("%v pmi %q: %v", c.hosts, c.pmi, err)
			continue
		}
		if got := strings.Join(listen, " "); got != c.listen {
			t.Errorf("%v pmi %q: listen on %q, want %q", c.hosts, c.pmi, got, c.listen)
		}
		if got := strings.Join(dial, " "); got != c.dial {
			t.Errorf("%v pmi %q: dial %q, want %q", c.hosts, c.pmi, got, c.dial)
		}
		for _, a := range listen {
			if net.ParseIP(a).IsUnspecified() {
				t.Errorf("%v: wildcard listen address", c.hosts)
			}
		}
	}
	for _, pmi := range []string{"any", "nowhere"} {
		if _, _, err := pmiAddresses([]Host{{"node7", 1}}, pmi, lookup, route); !errors.Is(err, ErrUsage) {
			t.Errorf("--pmi-host %s: %v, want ErrUsage", pmi, err)
		}
	}
	noSelf := func(name string) ([]net.IP, error) {
		if name == self {
			return []net.IP{ip("127.0.1.1")}, nil
		}
		return lookup(name)
	}
	if _, _, err := pmiAddresses([]Host{{"alias", 1}}, "", noSelf, route); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--pmi-host") {
		t.Errorf("unresolvable host, loopback-only hostname: %v", err)
	}
}

// segmentRank creates a node segment, as endpoint and onesided do, and is
// killed before anyone could unlink it.
func segmentRank() int {
	s, err := nodeseg.Create("ep", 4096)
	if err != nil {
		fmt.Fprintln(os.Stderr, "segment:", err)
		return 2
	}
	fmt.Println("created", s.Name())
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// TestSweepsNodeSegments: the node segments of ranks that died before
// removing them are gone once the job has ended.
func TestSweepsNodeSegments(t *testing.T) {
	dir := t.TempDir()
	var out proctest.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, Config{NP: 2, Stdout: &out, Stderr: &out, Argv: []string{self(t)},
		Env: []string{"WEFT_LAUNCH_HELPER=segment", "WEFT_SHM_DIR=" + dir}})
	if err == nil {
		t.Fatalf("job of killed ranks succeeded:\n%s", out.String())
	}
	if n := strings.Count(out.String(), "created weft-ep-"); n == 0 {
		t.Fatalf("no rank created its segment (err %v):\n%s", err, out.String())
	}
	ents, rerr := os.ReadDir(dir)
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, e := range ents {
		t.Errorf("left in %s after the job: %s", dir, e.Name())
	}
}
