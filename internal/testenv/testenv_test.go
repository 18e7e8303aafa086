package testenv

import "testing"

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		feature, req, provs string
		want                bool
	}{
		{"sshd", "", "", false},
		{"sshd", "sshd", "", true},
		{"sshd", "slurm, sshd", "", true},
		{"sshd", "all", "", true},
		{"sshd", "ssh", "", false},
		{"provider:shm", "provider:", "", true},
		{"provider:shm", "provider:tcp", "", false},
		{"provider:shm", "", "1", true},
		{"provider:shm", "", "all", true},
		{"provider:shm", "", "tcp;ofi_rxm,shm", true},
		{"provider:shm", "", "tcp;ofi_rxm", false},
		{"gpu", "", "1", false},
	} {
		if got := required(tc.feature, tc.req, tc.provs); got != tc.want {
			t.Errorf("required(%q, WEFT_REQUIRE=%q, WEFT_REQUIRE_PROVIDERS=%q) = %v, want %v", tc.feature, tc.req, tc.provs, got, tc.want)
		}
	}
}

// TestSkipFailsWhenRequired runs Skip on a fake TB and checks that it
// skips normally and fails when the feature is required.
func TestSkipFailsWhenRequired(t *testing.T) {
	t.Setenv("WEFT_REQUIRE", "")
	t.Setenv("WEFT_REQUIRE_PROVIDERS", "")
	ok := t.Run("skips", func(t *testing.T) {
		Skip(t, "gpu", "no device")
		t.Error("Skip returned")
	})
	if !ok {
		t.Fatal("a skipped subtest failed")
	}
	f := &fakeTB{}
	t.Setenv("WEFT_REQUIRE", "gpu")
	func() {
		defer func() { recover() }()
		Skip(f, "gpu", "no device")
	}()
	if !f.fatal || f.skipped {
		t.Errorf("required feature: fatal %v, skipped %v; want a failure", f.fatal, f.skipped)
	}
}

type fakeTB struct {
	testing.TB
	fatal, skipped bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Fatalf(string, ...any) { f.fatal = true; panic("fatal") }
func (f *fakeTB) Skipf(string, ...any)  { f.skipped = true; panic("skip") }

// TestProvider: WEFT_TEST_PROVIDERS skips the variants of other providers
// and keeps its own, those without a provider, and every variant when
// unset; WEFT_REQUIRE=long turns its skip into a failure.
func TestProvider(t *testing.T) {
	t.Setenv("WEFT_REQUIRE", "")
	t.Setenv("WEFT_REQUIRE_PROVIDERS", "")
	call := func(only, provider string) (skipped, fatal bool) {
		t.Setenv("WEFT_TEST_PROVIDERS", only)
		f := &fakeTB{}
		func() {
			defer func() { recover() }()
			Provider(f, provider)
		}()
		return f.skipped, f.fatal
	}
	for _, c := range []struct {
		only, provider string
		skip           bool
	}{
		{"", "tcp;ofi_rxm", false},
		{"shm", "shm", false},
		{"shm", "", false},
		{"shm", "tcp;ofi_rxm", true},
		{"shm,sockets", "sockets", false},
		{"shm,sockets", "tcp;ofi_rxm", true},
	} {
		if skipped, fatal := call(c.only, c.provider); skipped != c.skip || fatal {
			t.Errorf("WEFT_TEST_PROVIDERS=%q, provider %q: skipped %v, failed %v; want skipped %v", c.only, c.provider, skipped, fatal, c.skip)
		}
	}
	t.Setenv("WEFT_REQUIRE", "long")
	if skipped, fatal := call("shm", "tcp;ofi_rxm"); skipped || !fatal {
		t.Errorf("WEFT_REQUIRE=long: skipped %v, failed %v; want a failure", skipped, fatal)
	}
}
