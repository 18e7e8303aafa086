// Package cpucache reads the sizes of CPU 0's caches from sysfs (Linux),
// for the copy and datatype code that sizes its work to the cache.
package cpucache

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Size returns the size in bytes of the data (or unified) cache of the
// given level that sysfs reports for CPU 0, the largest cache for level
// 0, or def when it cannot be read (no sysfs, another OS).
func Size(level int, def int64) int64 {
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
		if v := parseSize(strings.TrimSpace(string(b))); v > best {
			best = v
		}
	}
	if best == 0 {
		return def
	}
	return best
}

// LastLevel returns the size of the largest cache, or def.
func LastLevel(def int64) int64 { return Size(0, def) }

// parseSize reads sysfs's "32768K" or "2M" (or plain bytes); 0 if it
// cannot.
func parseSize(s string) int64 {
	mul := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v * mul
}
