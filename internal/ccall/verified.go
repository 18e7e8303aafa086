package ccall

import "strings"

// VerifiedReleases lists the Go releases (major.minor) whose runtime Call
// was checked against: the invariants in RATIONALE.md ("Why may fabric call
// C without cgo?") hold there and the package's tests pass. Callers that
// choose Call by default should do so only on these releases.
var VerifiedReleases = []string{"go1.26"}

// Verified reports whether version, as runtime.Version() spells it
// ("go1.26.8", "go1.26rc1", "devel go1.27-abcdef …"), is a release in
// VerifiedReleases. Development builds are not verified.
func Verified(version string) bool {
	if !Supported || !strings.HasPrefix(version, "go1.") {
		return false
	}
	rest := version[len("go1."):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 {
		return false
	}
	release := version[:len("go1.")+n]
	for _, r := range VerifiedReleases {
		if r == release {
			return true
		}
	}
	return false
}
