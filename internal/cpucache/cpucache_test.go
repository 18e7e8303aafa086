package cpucache

import (
	"os"
	"testing"
)

// TestParseSize: sysfs's forms, and what is not a size.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"32768K": 32 << 20, "2M": 2 << 20, "512": 512, "": 0, "12Q": 0, "-4K": 0} {
		if got := parseSize(in); got != want {
			t.Errorf("parseSize(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestSize: where sysfs lists CPU 0's caches, the largest is at least the
// level-1 data cache and the default is not used; elsewhere the default
// comes back.
func TestSize(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu/cpu0/cache/index0/size"); err != nil {
		if got := LastLevel(-1); got != -1 {
			t.Fatalf("no sysfs cache list, LastLevel = %d, want the default", got)
		}
		return
	}
	l1, last := Size(1, -1), LastLevel(-1)
	if l1 <= 0 || last < l1 {
		t.Fatalf("level 1 %d, largest %d", l1, last)
	}
	if got := Size(9, -7); got != -7 {
		t.Errorf("level 9 = %d, want the default", got)
	}
}
