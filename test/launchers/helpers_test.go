package launchers_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

var bins = proctest.NewBuilder("github.com/weft-hpc/weft/cmd/fabrun", "github.com/weft-hpc/weft/examples/hello")

func TestMain(m *testing.M) {
	code := m.Run()
	bins.Close()
	os.Exit(code)
}

// binaries builds fabrun and examples/hello once per test run.
func binaries(t *testing.T) (fabrun, hello string) {
	t.Helper()
	return bins.Path(t, "fabrun"), bins.Path(t, "hello")
}

type result = proctest.Result

// run runs a command with a deadline and extra environment.
func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) result {
	t.Helper()
	return proctest.Run(t, timeout, env, "", name, args...)
}

// checkRing checks that n ranks printed their ring line.
func checkRing(t *testing.T, what string, r result, n int) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", what, r.Code, r.Stdout, r.Stderr)
	}
	for rank := range n {
		if want := fmt.Sprintf("rank %d of %d on ", rank, n); !strings.Contains(r.Stdout, want) {
			t.Errorf("%s: no %q...ring ok line in:\n%s%s", what, want, r.Stdout, r.Stderr)
		}
	}
	if c := strings.Count(r.Stdout, ": ring ok"); c != n {
		t.Errorf("%s: %d ring ok lines, want %d:\n%s", what, c, n, r.Stdout)
	}
}

// freePorts returns n distinct TCP ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
