package fabric

import "testing"

// TestLayouts checks that the Go types filled by C have the C layouts.
func TestLayouts(t *testing.T) {
	if c, g := cLayouts(), goLayouts(); c != g {
		t.Fatalf("C layouts %v, Go mirrors %v", c, g)
	}
}
