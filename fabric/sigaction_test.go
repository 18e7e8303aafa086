package fabric

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sigChild is the test binary as a child of the signal tests (TestMain,
// WEFT_FABRIC_SIGCHILD): "init" prints "up" and then runs the fabric's
// initialisation (GetInfo over every provider, OpenFabric, OpenDomain,
// Close) over and over until a signal ends it; "ready" initialises once
// (an shm endpoint), prints "ready PID" and waits.
func sigChild(mode string) int {
	switch mode {
	case "init":
		fmt.Println("up")
		for {
			infos, err := GetInfo(nil)
			if err != nil {
				fmt.Fprintln(os.Stderr, "sigchild:", err)
				return 3
			}
			if err := openClose(infos[0]); err != nil {
				fmt.Fprintln(os.Stderr, "sigchild:", err)
				return 3
			}
		}
	case "ready":
		p, err := openProc("shm")
		if err != nil {
			fmt.Fprintln(os.Stderr, "sigchild:", err)
			return 3
		}
		fmt.Println("ready", os.Getpid())
		time.Sleep(time.Minute)
		_ = p
		return 4
	}
	return 2
}

func openClose(info *Info) error {
	f, err := OpenFabric(info)
	if err != nil {
		return err
	}
	d, err := f.OpenDomain(info)
	if err != nil {
		f.Close()
		return err
	}
	d.Close()
	return f.Close()
}

// TestSignalHandlersNotGrabbed checks the process's dispositions after the
// calls that load libfabric and initialise providers: no signal is handled
// by the libraries that libfabric loads (libinfinipath installs handlers
// for SIGINT and SIGTERM from its constructor unless told not to), and the
// guard around those calls undoes a foreign handler installed during one.
// (libfabric's shm provider installs handlers of its own when it opens an
// endpoint, which remove its shared-memory files and pass the signal on
// to the handler they replaced; TestSignalAfterInit covers them.)
func TestSignalHandlersNotGrabbed(t *testing.T) {
	infos, err := GetInfo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := openClose(infos[0]); err != nil {
		t.Fatal(err)
	}
	if m := sigGrabbedNow(); m != 0 {
		t.Errorf("signals handled by a fabric library after GetInfo/OpenFabric/OpenDomain: %#x", m)
	}
	t.Logf("handlers restored after guarded calls so far: %#x", sigRestored())
	if r := sigGuardSelftest(int(syscall.SIGUSR2)); r != 1 {
		t.Errorf("guard self-test: %d, want 1 (foreign handler undone)", r)
	}
}

// TestSignalDuringInit sends SIGTERM or SIGINT to real processes at
// staggered moments of their start and of the fabric's initialisation
// (the Go runtime's start, the load of libfabric and its libraries'
// constructors in the first GetInfo, GetInfo, OpenFabric, OpenDomain):
// every one must die from that signal, promptly.
func TestSignalDuringInit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	n := 30
	if testing.Short() {
		n = 12
	}
	// A shell that starts a test in the background ignores SIGINT for it,
	// and its children rightly keep ignoring it.
	intOK := !signal.Ignored(syscall.SIGINT)
	if !intOK {
		t.Log("SIGINT is ignored in this process (and so in its children): sending SIGTERM only")
	}
	type result struct {
		i      int
		sig    syscall.Signal
		early  bool
		status string
		ok     bool
	}
	results := make(chan result, n)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			sig := syscall.SIGTERM
			if i%2 == 1 && intOK {
				sig = syscall.SIGINT
			}
			// A third of the signals are sent at a delay after the start
			// (0 to 290 ms: the runtime's start, then the first GetInfo,
			// which loads libfabric), the rest at 0 to 60 ms after the
			// child reported it is in the initialisation loop (most
			// during the load, which takes ≈ 200 ms).
			early := i%3 == 0
			delay := time.Duration(i*10%300) * time.Millisecond
			if !early {
				delay = time.Duration(i*7%61) * time.Millisecond
			}
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), "WEFT_FABRIC_SIGCHILD=init")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				results <- result{i: i, sig: sig, status: err.Error()}
				return
			}
			if err := cmd.Start(); err != nil {
				results <- result{i: i, sig: sig, status: err.Error()}
				return
			}
			if early {
				time.Sleep(delay)
			} else {
				line, err := bufio.NewReader(out).ReadString('\n')
				if err != nil || line != "up\n" {
					cmd.Process.Kill()
					cmd.Wait()
					results <- result{i: i, sig: sig, status: fmt.Sprintf("child did not start: %q %v: %s", line, err, stderr.String())}
					return
				}
				time.Sleep(delay)
			}
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var werr error
			select {
			case werr = <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
				results <- result{i: i, sig: sig, early: early, status: "still running 10s after the signal (killed)"}
				return
			}
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			r := result{i: i, sig: sig, early: early, status: fmt.Sprintf("%v %s", werr, strings.TrimSpace(stderr.String()))}
			r.ok = ws.Signaled() && ws.Signal() == sig
			var ee *exec.ExitError
			if !errors.As(werr, &ee) {
				r.ok = false
			}
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	bad := 0
	for r := range results {
		if !r.ok {
			bad++
			t.Errorf("child %d (%v, early %v): %s", r.i, r.sig, r.early, r.status)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d children did not die from their signal", bad, n)
	}
}

// TestSignalAfterInit: a process that has initialised the fabric and is
// killed by SIGTERM dies from it, and a shell reports status 143.
func TestSignalAfterInit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `"$0"; echo "status $?"`, exe)
	cmd.Env = append(os.Environ(), "WEFT_FABRIC_SIGCHILD=ready")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	rd := bufio.NewReader(out)
	line, err := rd.ReadString('\n')
	var pid int
	if _, serr := fmt.Sscanf(line, "ready %d", &pid); err != nil || serr != nil {
		t.Fatalf("child: %q %v\n%s", line, err, stderr.String())
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	line, err = rd.ReadString('\n')
	if line != "status 143\n" {
		t.Errorf("after SIGTERM the shell reports %q (%v), want status 143\n%s", line, err, stderr.String())
	}
}
