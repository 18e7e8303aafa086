// Package wlog gives every weft package a named go-hclog logger whose level
// comes from the WEFT_LOG_LEVEL environment variable (trace, debug, info,
// warn, error, off; default warn). Output goes to standard error.
package wlog

import (
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
)

var (
	once sync.Once
	root hclog.Logger
)

// Root returns the process-wide weft logger.
func Root() hclog.Logger {
	once.Do(func() {
		lvl := hclog.LevelFromString(os.Getenv("WEFT_LOG_LEVEL"))
		if lvl == hclog.NoLevel {
			lvl = hclog.Warn
		}
		root = hclog.New(&hclog.LoggerOptions{
			Name:   "weft",
			Level:  lvl,
			Output: os.Stderr,
		})
	})
	return root
}

// Named returns a sub-logger for one component, for example wlog.Named("fabric").
func Named(name string) hclog.Logger { return Root().Named(name) }
