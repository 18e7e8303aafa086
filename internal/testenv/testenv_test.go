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
