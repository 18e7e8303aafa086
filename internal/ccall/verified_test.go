package ccall

import (
	"runtime"
	"testing"
)

func TestVerified(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"go1.26", true},
		{"go1.26.8", true},
		{"go1.26rc1", true},
		{"go1.25.3", false},
		{"go1.260", false},
		{"go1.2", false},
		{"devel go1.27-0123abcd Mon Jan 1 2027", false},
		{"go1.", false},
		{"", false},
	} {
		if got := Verified(tc.v); got != tc.want && Supported {
			t.Errorf("Verified(%q) = %v, want %v", tc.v, got, tc.want)
		}
		if !Supported && Verified(tc.v) {
			t.Errorf("Verified(%q) without a trampoline", tc.v)
		}
	}
}

// TestThisReleaseListed: the suite runs the invariant tests below on the
// release that builds it; once they pass on a new release, that release is
// added to VerifiedReleases (and its line in RATIONALE.md). Until then fast
// calls are off by default there, which this test reports.
func TestThisReleaseListed(t *testing.T) {
	if Supported && !Verified(runtime.Version()) {
		t.Logf("%s is not in VerifiedReleases %v: fabric's fast calls default to off; add it once this package's tests pass", runtime.Version(), VerifiedReleases)
	}
}
