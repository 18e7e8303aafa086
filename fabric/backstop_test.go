package fabric

import (
	"runtime"
	"testing"
	"time"
)

// TestBackstopClosesLeaks drops an endpoint, CQ and AV without closing
// them and checks that the cleanup backstop closes them.
func TestBackstopClosesLeaks(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg})
	before := LiveObjects()["ep"]
	func() {
		cq, err := p.dom.OpenCQ(8)
		if err != nil {
			t.Fatal(err)
		}
		av, err := p.dom.OpenAV(1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.dom.OpenEndpoint(p.info, cq, av); err != nil {
			t.Fatal(err)
		}
	}()
	if got := LiveObjects()["ep"]; got != before+1 {
		t.Fatalf("live endpoints %d, want %d", got, before+1)
	}
	deadline := time.Now().Add(5 * time.Second)
	for LiveObjects()["ep"] != before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := LiveObjects()["ep"]; got != before {
		t.Fatalf("leaked endpoint not closed by the backstop: %d live, want %d", got, before)
	}
}
