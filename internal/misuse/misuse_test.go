package misuse

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
)

type target struct{}

// Index panics on an index out of range, as an unchecked method would.
func (target) Index(i int) int { return []int{1, 2, 3}[i] }

// Block ignores its context.
func (target) Block(ctx context.Context, n int) error {
	if n < 0 {
		time.Sleep(time.Hour)
	}
	return nil
}

// Fine checks its arguments.
func (target) Fine(b []byte, n int) error { return nil }

// Close is skipped.
func (target) Close() { panic("Close called") }

// TestMethods: a method that panics and one that never returns are
// reported, each once however often they fail; a skipped method is not
// called, and a method that returns is not reported.
func TestMethods(t *testing.T) {
	p := New(1, Config{Skip: []string{"Close"}, Wait: 200 * time.Millisecond})
	var bad []string
	for range 40 {
		bad = append(bad, p.Methods(target{})...)
	}
	var index, block int
	for _, b := range bad {
		switch {
		case strings.Contains(b, ".Index(") && strings.Contains(b, "panic: runtime error: index out of range"):
			index++
		case strings.Contains(b, ".Block(") && strings.Contains(b, "no return within"):
			block++
		default:
			t.Errorf("unexpected report: %s", b)
		}
	}
	if index != 1 || block != 1 {
		t.Errorf("%d Index and %d Block reports, want one each:\n%s", index, block, strings.Join(bad, "\n"))
	}
}

// TestArg: drawn integers include negative and huge ones, slices nil and
// empty ones, pointers nil and zero values, and contexts end.
func TestArg(t *testing.T) {
	p := New(2, Config{CtxTimeout: time.Millisecond})
	seen := map[string]bool{}
	for range 200 {
		switch n := p.Arg(typeOf[int]()).Interface().(int); {
		case n < 0:
			seen["negative"] = true
		case n >= 1<<40:
			seen["huge"] = true
		}
		switch s := p.Arg(typeOf[[]byte]()).Interface().([]byte); {
		case s == nil:
			seen["nil slice"] = true
		case len(s) == 0:
			seen["empty slice"] = true
		}
		if q := p.Arg(typeOf[*target]()).Interface().(*target); q == nil {
			seen["nil pointer"] = true
		} else {
			seen["zero pointer"] = true
		}
	}
	for _, k := range []string{"negative", "huge", "nil slice", "empty slice", "nil pointer", "zero pointer"} {
		if !seen[k] {
			t.Errorf("no %s drawn", k)
		}
	}
	ctx := p.Arg(ctxType).Interface().(context.Context)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Error("a drawn context did not end")
	}
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }
