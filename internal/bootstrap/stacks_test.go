package bootstrap

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

//go:noinline
func stacksMarker(w *bytes.Buffer) { writeStacks(w, "5") }

func TestWriteStacks(t *testing.T) {
	var b bytes.Buffer
	release := make(chan struct{})
	parked := make(chan struct{})
	go func() {
		close(parked)
		<-release // a second goroutine the dump must show too
	}()
	<-parked
	stacksMarker(&b)
	close(release)
	got := b.String()
	if want := fmt.Sprintf("weft: goroutine stacks of rank 5 (pid %d) on SIGUSR1\n", os.Getpid()); !strings.HasPrefix(got, want) {
		t.Errorf("dump does not start with %q:\n%s", want, got)
	}
	if !strings.Contains(got, "bootstrap.stacksMarker(") || !strings.Contains(got, "bootstrap.TestWriteStacks.func1(") {
		t.Errorf("dump lacks this goroutine or the parked one:\n%s", got)
	}
}
