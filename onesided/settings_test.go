package onesided

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSettingsErrors: a bad WEFT_ONESIDED_* value or WEFT_TUNE fails window
// creation with ErrInvalid naming the variable and the allowed values,
// instead of being ignored.
func TestSettingsErrors(t *testing.T) {
	for _, c := range []struct{ env, val, want string }{
		{"WEFT_ONESIDED_WAIT", "sometimes", "auto, spin, yield"},
		{"WEFT_ONESIDED_TIMEOUT", "soon", "a duration"},
		{"WEFT_ONESIDED_TIMEOUT", "-1s", "a duration"},
		{"WEFT_ONESIDED_SHM", "maybe", "auto, on, off"},
		{"WEFT_ONESIDED_ORDER", "random", "auto, waw, fence, delivery, cqdata"},
		{"WEFT_TUNE", "osspin=-3", "osspin"},
	} {
		t.Run(c.env+"="+c.val, func(t *testing.T) {
			t.Setenv(c.env, c.val)
			o := resolveOptions(nil)
			if !errors.Is(o.err, ErrInvalid) || !strings.Contains(o.err.Error(), c.env) || !strings.Contains(o.err.Error(), c.want) {
				t.Fatalf("resolveOptions: %v, want ErrInvalid naming %s and %q", o.err, c.env, c.want)
			}
			if _, err := Allocate(t.Context(), fakeGroup{}, 64); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Allocate: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestSettingsOptions: options override the environment per window.
func TestSettingsOptions(t *testing.T) {
	t.Setenv("WEFT_ONESIDED_WAIT", "yield")
	t.Setenv("WEFT_ONESIDED_TIMEOUT", "5s")
	o := resolveOptions(nil)
	if o.err != nil || o.wait != "yield" || o.timeout != 5*time.Second {
		t.Fatalf("from env: %+v", o)
	}
	o = resolveOptions([]Option{WithWaitPolicy("spin"), WithTimeout(time.Second)})
	if o.err != nil || o.wait != "spin" || o.timeout != time.Second {
		t.Fatalf("options: %+v", o)
	}
	for _, opt := range []Option{WithWaitPolicy("nap"), WithTimeout(0)} {
		if o := resolveOptions([]Option{opt}); !errors.Is(o.err, ErrInvalid) {
			t.Errorf("bad option accepted: %v", o.err)
		}
	}
	if p, err := choosePolicy("yield", 1); err != nil || p.Name != "yield" {
		t.Errorf("choosePolicy(yield) = %v, %v", p.Name, err)
	}
}

// fakeGroup is a one-rank group that must not be used: the windows above
// fail before any collective call.
type fakeGroup struct{}

func (fakeGroup) Rank() int { return 0 }
func (fakeGroup) Size() int { return 1 }
func (fakeGroup) Barrier(context.Context) error {
	panic("fakeGroup: Barrier called")
}
func (fakeGroup) Allgather(context.Context, []byte) ([][]byte, error) {
	panic("fakeGroup: Allgather called")
}
