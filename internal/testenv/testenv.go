// Package testenv is the one place where a weft test decides what to do
// when something it needs is missing on this machine: skip, saying why, or
// fail, when the environment says the feature must be there.
//
// A feature is a short name: "provider:shm", "provider:tcp;ofi_rxm",
// "sshd", "slurm", "hydra", "mpich", "cluster" (the multi-node test cluster
// of internal/testcluster), "gpu", "amd64", "long" (tests skipped
// by -short), "profiling". WEFT_REQUIRE lists required features, separated
// by commas ("all" requires every one); a name ending in ':' covers every
// feature with that prefix ("provider:"). WEFT_REQUIRE_PROVIDERS, the
// older variable, requires providers: every one when set to 1 or all,
// otherwise the listed provider names.
package testenv

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// Required reports whether the environment says feature must be present.
func Required(feature string) bool {
	return required(feature, os.Getenv("WEFT_REQUIRE"), os.Getenv("WEFT_REQUIRE_PROVIDERS"))
}

func required(feature, req, provs string) bool {
	for _, f := range strings.Split(req, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case f == "all" || f == feature:
			return true
		case strings.HasSuffix(f, ":") && strings.HasPrefix(feature, f):
			return true
		}
	}
	if name, ok := strings.CutPrefix(feature, "provider:"); ok && provs != "" {
		for _, p := range strings.Split(provs, ",") {
			p = strings.TrimSpace(p)
			if p == "1" || p == "all" || p == name {
				return true
			}
		}
	}
	return false
}

// Skip skips t because feature is missing here, with the reason; when the
// environment requires feature (Required) it fails t instead.
func Skip(t testing.TB, feature, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if Required(feature) {
		t.Fatalf("%s is required here (WEFT_REQUIRE / WEFT_REQUIRE_PROVIDERS) but missing: %s", feature, why)
	}
	t.Skipf("%s missing: %s", feature, why)
}

// Short skips t under -short (feature "long"), saying what it leaves out.
func Short(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		Skip(t, "long", "%s; skipped with -short", what)
	}
}

// Provider skips t, a test's variant on a libfabric provider (launched
// ranks or in-process ones), when WEFT_TEST_PROVIDERS lists the providers
// whose variants run and provider is not among them (feature "long", as
// for -short). make test's race pass sets it to shm: the other providers'
// variants run the same Go code, and its first pass runs them.
func Provider(t testing.TB, provider string) {
	t.Helper()
	if only := os.Getenv("WEFT_TEST_PROVIDERS"); only != "" && provider != "" && !slices.Contains(strings.Split(only, ","), provider) {
		Skip(t, "long", "the %s variant; WEFT_TEST_PROVIDERS=%s runs only those", provider, only)
	}
}
