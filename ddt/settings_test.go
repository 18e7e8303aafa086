package ddt

import (
	"errors"
	"strings"
	"testing"
)

// TestJITFromEnv: WEFT_JIT goes through the settings registry; a bad value
// is an ErrInvalid naming the variable and the allowed values (Commit then
// returns it), not a warning.
func TestJITFromEnv(t *testing.T) {
	for v, want := range map[string]JITMode{"": JITAuto, "auto": JITAuto, "on": JITOn, "1": JITOn, "OFF": JITOff, "no": JITOff} {
		t.Setenv("WEFT_JIT", v)
		if m, err := jitFromEnv(); err != nil || m != want {
			t.Errorf("WEFT_JIT=%q: %v, %v; want %v", v, m, err, want)
		}
	}
	t.Setenv("WEFT_JIT", "sometimes")
	if _, err := jitFromEnv(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "WEFT_JIT") || !strings.Contains(err.Error(), "auto, on, off") {
		t.Fatalf("WEFT_JIT=sometimes: %v", err)
	}
}
