package jit

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/jit/internal/amd64"
)

// TestFaultInGeneratedCodeRecovers checks what ARCHITECTURE.md relies on: a
// memory fault inside leaf generated code (here a load from address 8)
// surfaces as an ordinary recoverable Go runtime error, not a crash.
func TestFaultInGeneratedCodeRecovers(t *testing.T) {
	needNative(t)
	a := amd64.New(16)
	a.MovImm(amd64.RAX, 8)
	a.Load(8, amd64.RAX, amd64.M(amd64.RAX, 0))
	a.Ret()
	code, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	m, err := newCode(code, defaultConfig.dualMap)
	if err != nil {
		t.Fatal(err)
	}
	defer m.release()
	var got any
	func() {
		defer func() { got = recover() }()
		var args callArgs
		callCode(uintptr(unsafe.Pointer(&m.mem[0])), &args)
	}()
	if _, ok := got.(runtime.Error); !ok {
		t.Fatalf("fault in generated code: recovered %v (%T), want a runtime.Error", got, got)
	}
	t.Logf("recovered: %v", got)
}
