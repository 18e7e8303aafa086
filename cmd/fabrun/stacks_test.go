package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/bootstrap"
	"github.com/weft-hpc/weft/internal/proctest"
)

// hangRank is a rank of the stack dump tests: it initialises its bootstrap,
// prints "rank N up" and blocks in hangHere. With
// WEFT_FABRUN_TEST_RELEASE=1, rank 0 leaves hangHere when a line arrives on
// its stdin and the others once rank 0 joins their fence; the job then
// finalizes and every rank prints "rank N done". WEFT_FABRUN_TEST_RELEASE_FILE
// does the same with rank 0 waiting for that file to exist instead (ssh
// ranks have no stdin). Without either, hangHere blocks until the rank is
// killed (or 60 s pass).
func hangRank() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := bootstrap.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rank:", err)
		return 2
	}
	fmt.Printf("rank %d up\n", b.Rank())
	if err := hangHere(ctx, b, os.Getenv("WEFT_FABRUN_TEST_RELEASE") == "1", os.Getenv("WEFT_FABRUN_TEST_RELEASE_FILE")); err != nil {
		fmt.Fprintln(os.Stderr, "rank:", err)
		return 2
	}
	if err := b.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "rank:", err)
		return 2
	}
	fmt.Printf("rank %d done\n", b.Rank())
	return 0
}

// hangHere is the function the stack dumps must show.
//
//go:noinline
func hangHere(ctx context.Context, b bootstrap.Bootstrap, release bool, releaseFile string) error {
	if !release && releaseFile == "" {
		<-ctx.Done()
		return ctx.Err()
	}
	if b.Rank() == 0 && releaseFile != "" {
		for {
			if _, err := os.Stat(releaseFile); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", releaseFile, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	} else if b.Rank() == 0 {
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("waiting for the release line: %w", err)
		}
	}
	return b.Fence(ctx)
}

// TestTimeoutDumpsStacks: when --timeout ends a hung job, every rank first
// writes its goroutine stacks, each line tagged with its rank even without
// --tag-output; fabrun still exits 124 and leaves nothing behind.
func TestTimeoutDumpsStacks(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mark := proctest.Marker()
	r := runFabrun(t, []string{"WEFT_FABRUN_TEST_RANK=hang"}, "", "-n", "3", "--timeout", "2s", "--env", mark, self)
	if r.Code != 124 || !strings.Contains(r.Stderr, "fabrun: job timed out after 2s") {
		t.Fatalf("exit %d after %v, want 124 and the timeout named\n%s%s", r.Code, r.Took, r.Stdout, r.Stderr)
	}
	if m := stacksMissing(r.Stderr, 3); len(m) > 0 {
		t.Errorf("no tagged stack with hangHere from ranks %v in:\n%s", m, r.Stderr)
	}
	if r.Took > 6*time.Second {
		t.Errorf("took %v", r.Took)
	}
	if left := proctest.WaitGone(mark, 3*time.Second); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}

	// Opted out: no stacks, and the same exit.
	r = runFabrun(t, []string{"WEFT_FABRUN_TEST_RANK=hang", "WEFT_TIMEOUT_STACKS=0"}, "", "-n", "2", "--timeout", "1s", "--env", mark, self)
	if r.Code != 124 || strings.Contains(r.Stderr, "hangHere") {
		t.Errorf("--timeout-stacks=false: exit %d\n%s", r.Code, r.Stderr)
	}
	if left := proctest.WaitGone(mark, 3*time.Second); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// lineWatch collects a stream's lines and says when a condition on them
// holds.
type lineWatch struct {
	mu    sync.Mutex
	text  strings.Builder
	check func(string) bool
	hit   chan struct{}
	once  sync.Once
	ended chan struct{}
}

func watchLines(r io.Reader, check func(string) bool) *lineWatch {
	w := &lineWatch{check: check, hit: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		br := bufio.NewReader(r)
		for {
			l, err := br.ReadString('\n')
			w.mu.Lock()
			w.text.WriteString(l)
			ok := w.check(w.text.String())
			w.mu.Unlock()
			if ok {
				w.once.Do(func() { close(w.hit) })
			}
			if err != nil {
				return
			}
		}
	}()
	return w
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.text.String()
}

// TestSIGUSR1DumpsStacks: SIGUSR1 to fabrun makes every weft rank write its
// goroutine stacks, tagged with its rank, without ending the job, which
// then completes normally.
func TestSIGUSR1DumpsStacks(t *testing.T) {
	fab, _ := binaries(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const np = 3
	mark := proctest.Marker()
	cmd := exec.Command(fab, "-n", fmt.Sprint(np), "--launcher", "local", "--timeout", "20s", self)
	cmd.Env = append(os.Environ(), mark, "WEFT_FABRUN_TEST_RANK=hang", "WEFT_FABRUN_TEST_RELEASE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	so, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	se, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		killMarked(mark)
	})
	out := watchLines(so, func(s string) bool { return strings.Count(s, " up\n") == np })
	errs := watchLines(se, func(s string) bool { return len(stacksMissing(s, np)) == 0 })
	deadline := time.After(10 * time.Second)
	select {
	case <-out.hit:
	case <-deadline:
		t.Fatalf("ranks did not start\n%s%s", out, errs)
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-errs.hit:
	case <-deadline:
		t.Fatalf("no tagged stacks with hangHere from ranks %v after SIGUSR1\n%s%s", stacksMissing(errs.String(), np), out, errs)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	<-out.ended
	<-errs.ended
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("fabrun after SIGUSR1 and release: %v\n%s%s", err, out, errs)
	}
	for r := range np {
		if want := fmt.Sprintf("[%d] rank %d done\n", r, r); !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if !strings.Contains(errs.String(), "[1] weft: goroutine stacks of rank 1 (pid ") {
		t.Errorf("no dump header for rank 1 in:\n%s", errs)
	}
	if left := proctest.WaitGone(mark, 3*time.Second); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// stacksMissing returns the ranks below np without a line tagged "[rank] "
// that shows a hangHere frame.
func stacksMissing(out string, np int) []int { return proctest.RanksWithout(out, ".hangHere(", np) }
