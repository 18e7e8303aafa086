package jit

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/ddtir"
)

// TestWEFTJITOff runs this test binary again with WEFT_JIT=off in its
// environment: the package must not register itself, and no type may get
// generated code afterwards, not after Enable, not with its own mode on, not
// with the default mode set to on. Commit succeeds and the interpreter packs.
func TestWEFTJITOff(t *testing.T) {
	if os.Getenv("WEFT_JIT_OFF_CHILD") == "1" {
		weftJITOffChild(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWEFTJITOff$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WEFT_JIT_OFF_CHILD=1", "WEFT_JIT=off")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("PASS")) {
		t.Fatalf("child with WEFT_JIT=off: %v\n%s", err, out)
	}
}

func weftJITOffChild(t *testing.T) {
	if !ddt.JITDisabled() {
		t.Fatal("WEFT_JIT=off in the environment but ddt.JITDisabled is false")
	}
	if ddtir.Registered() != nil {
		t.Fatal("jit registered itself under WEFT_JIT=off")
	}
	_ = Enable() // registering has no effect now (ErrUnsupported where no native code)
	defer Disable()
	typed := make([]byte, 300*7*4)
	for i := range typed {
		typed[i] = byte(i * 7)
	}
	var want []byte
	for _, def := range []ddt.JITMode{ddt.JITAuto, ddt.JITOn} {
		ddt.SetDefaultJITMode(def)
		for _, own := range []ddt.JITMode{ddt.JITOn, ddt.JITAuto, ddt.JITOff, 255} {
			ty, err := ddt.Vector(300, 3, 7, ddt.Float32)
			if err != nil {
				t.Fatal(err)
			}
			if own != 255 {
				if err := ty.SetJIT(own); err != nil {
					t.Fatal(err)
				}
			}
			if err := ty.Commit(); err != nil {
				t.Fatalf("default %v, own %v: Commit: %v", def, own, err)
			}
			if ty.Compiled() || ty.JITPending() {
				t.Fatalf("default %v, own %v: Compiled %v, JITPending %v under WEFT_JIT=off", def, own, ty.Compiled(), ty.JITPending())
			}
			got := make([]byte, 300*3*4)
			for range 40 { // enough traffic for the auto policy, were it active
				if _, err := ty.Pack(got, typed, 1); err != nil {
					t.Fatal(err)
				}
			}
			if ty.Compiled() {
				t.Fatalf("default %v, own %v: compiled after use under WEFT_JIT=off", def, own)
			}
			if want == nil {
				want = got
			} else if !bytes.Equal(got, want) {
				t.Fatalf("default %v, own %v: pack differs", def, own)
			}
		}
	}
}
