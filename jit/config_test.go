//go:build amd64

package jit

import (
	"reflect"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// TestConfigKey: changing any field of a configuration changes its key, so
// the code cache never hands out code generated under another
// configuration; with leaves its receiver alone.
func TestConfigKey(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[config]()
	seen := map[string]string{defaultConfig.key: "default"}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "key" {
			continue
		}
		c := defaultConfig.with(func(c *config) {
			switch v := reflect.ValueOf(c).Elem().Field(i); v.Kind() {
			case reflect.Int64:
				reflect.NewAt(v.Type(), v.Addr().UnsafePointer()).Elem().SetInt(v.Int() + 1)
			case reflect.Bool:
				reflect.NewAt(v.Type(), v.Addr().UnsafePointer()).Elem().SetBool(!v.Bool())
			default:
				t.Fatalf("field %s of kind %v", f.Name, v.Kind())
			}
		})
		if old, ok := seen[c.key]; ok {
			t.Errorf("changing %s gives the key of %s", f.Name, old)
		}
		seen[c.key] = f.Name
	}
	if again := newConfig(tune); again.key != defaultConfig.key {
		t.Error("the same tuning gives two keys")
	}
}

// TestCompilerConfigs: two compilers with different configurations compile
// the same type side by side, each to its own code (not the other's from
// the cache).
func TestCompilerConfigs(t *testing.T) {
	t.Parallel()
	needNative(t)
	ty := interpType(t, must(ddt.Vector(300, 3, 7, ddt.Float32)))
	small := &compiler{force: true, cfg: defaultConfig.with(func(c *config) { c.chunkBytes = 4096 })}
	plain := &compiler{force: true}
	for range 2 { // the second round is served from the cache
		ks, err := small.Compile(irOf(ty))
		if err != nil {
			t.Fatal(err)
		}
		kp, err := plain.Compile(irOf(ty))
		if err != nil {
			t.Fatal(err)
		}
		if b := ks.(*kernel).budget; b != 4096 {
			t.Errorf("small chunk: budget %d, want 4096", b)
		}
		if b := kp.(*kernel).budget; b != defaultConfig.chunkBytes {
			t.Errorf("default: budget %d, want %d", b, defaultConfig.chunkBytes)
		}
	}
}
