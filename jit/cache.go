package jit

import "github.com/weft-hpc/weft/internal/cpucache"

// lastLevelCache returns the size in bytes of the largest cache sysfs
// reports for CPU 0 (Linux), or def when it cannot be read.
func lastLevelCache(def int64) int64 { return cpucache.LastLevel(def) }

// cacheSize returns the size in bytes of the data (or unified) cache of the
// given level that sysfs reports for CPU 0 (Linux), the largest cache for
// level 0, or def when it cannot be read.
func cacheSize(level int, def int64) int64 { return cpucache.Size(level, def) }
