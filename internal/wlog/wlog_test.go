package wlog

import (
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLevelFromEnv(t *testing.T) {
	// Root is computed once per process; check the default and a sub-logger.
	l := Named("test")
	if l.Name() != "weft.test" {
		t.Fatalf("name = %q, want weft.test", l.Name())
	}
	if got := Root().GetLevel(); got == hclog.NoLevel {
		t.Fatalf("level unset")
	}
}
