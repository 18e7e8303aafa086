package fabric

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/weft-hpc/weft/internal/testenv"
)

func TestCandidates(t *testing.T) {
	t.Setenv("WEFT_PROVIDER", "")
	for _, c := range []struct {
		prov, env string
		oneNode   bool
		want      []string
		err       error
	}{
		{"", "", true, []string{"shm", "verbs;ofi_rxm", "efa", "tcp;ofi_rxm", "sockets"}, nil},
		{"", "", false, []string{"verbs;ofi_rxm", "efa", "tcp;ofi_rxm", "sockets"}, nil},
		{"tcp;ofi_rxm", "sockets", false, []string{"tcp;ofi_rxm"}, nil},
		{"", "sockets", false, []string{"sockets"}, nil},
		{"", "verbs;ofi_rxm, tcp;ofi_rxm", false, []string{"verbs;ofi_rxm", "tcp;ofi_rxm"}, nil},
		{"shm,tcp;ofi_rxm", "", true, []string{"shm", "tcp;ofi_rxm"}, nil},
		{"shm,tcp;ofi_rxm", "", false, []string{"tcp;ofi_rxm"}, nil}, // shm never across nodes
		{"shm", "", true, []string{"shm"}, nil},
		{"shm", "", false, nil, ErrInvalid},
		{"", "shm", false, nil, ErrInvalid},
		{" , ", "", false, nil, ErrInvalid},
	} {
		t.Setenv("WEFT_PROVIDER", c.env)
		got, err := Candidates(&Hints{Provider: c.prov}, c.oneNode)
		if !slices.Equal(got, c.want) || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("Candidates(%q, env %q, one node %v) = %q, %v; want %q, %v", c.prov, c.env, c.oneNode, got, err, c.want, c.err)
		}
	}
}

// TestSelectOpenFallback: a provider that matches but cannot be opened is
// passed over for the next one, and when none can be opened the error
// names each provider tried with its reason.
func TestSelectOpenFallback(t *testing.T) {
	t.Setenv("WEFT_PROVIDER", "")
	var tried []string
	info, err := SelectOpen(&Hints{Provider: "shm,tcp;ofi_rxm,sockets", Caps: CapMsg}, true, func(i *Info) error {
		tried = append(tried, i.Provider)
		if i.Provider == "shm" {
			return errors.New("fi_enable: Invalid argument (pretend)")
		}
		return nil
	})
	if err != nil {
		skipNoProvider(t, "tcp", err)
	}
	if info.Provider != "tcp;ofi_rxm" || !slices.Equal(tried, []string{"shm", "tcp;ofi_rxm"}) {
		t.Errorf("chose %s after trying %q, want tcp;ofi_rxm after shm", info.Provider, tried)
	}

	_, err = SelectOpen(&Hints{Provider: "no-such-provider,shm,tcp;ofi_rxm", Caps: CapMsg}, true, func(i *Info) error {
		return errors.New("cannot open " + i.Provider)
	})
	if !errors.Is(err, ErrNoProvider) {
		t.Fatalf("every provider failing: %v, want ErrNoProvider", err)
	}
	for _, want := range []string{"no-such-provider: no provider for", "shm: cannot open shm", "tcp;ofi_rxm: cannot open tcp;ofi_rxm"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// TestSelectSetsUniverseSize: the job size reaches libfabric as
// FI_UNIVERSE_SIZE, unless the environment sets it; in a child process,
// where libfabric has not been loaded yet.
func TestSelectSetsUniverseSize(t *testing.T) {
	if !testenv.InChild(t, "TestSelectSetsUniverseSize") {
		return
	}
	os.Unsetenv("FI_UNIVERSE_SIZE")
	if Loaded() {
		t.Fatal("libfabric loaded before the first Select")
	}
	if _, err := Select(&Hints{Provider: "shm", Caps: CapMsg, JobSize: 7}, true); err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv("FI_UNIVERSE_SIZE"); v != "7" {
		t.Errorf("FI_UNIVERSE_SIZE = %q after a 7-rank Select", v)
	}
	// Only the first Select of a process sets it.
	Select(&Hints{Provider: "shm", Caps: CapMsg, JobSize: 9}, true)
	if v := os.Getenv("FI_UNIVERSE_SIZE"); v != "7" {
		t.Errorf("FI_UNIVERSE_SIZE = %q after a second Select", v)
	}
}
