package jit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// lastLevelCache returns the size in bytes of the largest cache sysfs
// reports for CPU 0 (Linux), or def when it cannot be read.
func lastLevelCache(def int64) int64 { return cacheSize(0, def) }

// cacheSize returns the size in bytes of the data (or unified) cache of the
// given level that sysfs reports for CPU 0 (Linux), the largest cache for
// level 0, or def when it cannot be read.
func cacheSize(level int, def int64) int64 {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	best := int64(0)
	for _, d := range dirs {
		if level > 0 {
			lv, err1 := os.ReadFile(filepath.Join(d, "level"))
			ty, err2 := os.ReadFile(filepath.Join(d, "type"))
			if err1 != nil || err2 != nil || strings.TrimSpace(string(lv)) != strconv.Itoa(level) || strings.TrimSpace(string(ty)) == "Instruction" {
				continue
			}
		}
		b, err := os.ReadFile(filepath.Join(d, "size"))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		mul := int64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			mul, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mul, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v*mul > best {
			best = v * mul
		}
	}
	if best == 0 {
		return def
	}
	return best
}
