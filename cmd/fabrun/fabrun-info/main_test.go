package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestInfo(t *testing.T) {
	var out, errb bytes.Buffer
	if code := info([]string{"--provider", "shm"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "  shm (fabric shm") || !strings.Contains(out.String(), "RDMA devices") {
		t.Errorf("output:\n%s", out.String())
	}
	// No configuration line is printed twice.
	seen := map[string]bool{}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "  ") && strings.Contains(l, "(fabric ") {
			if seen[l] {
				t.Errorf("configuration listed twice: %s", l)
			}
			seen[l] = true
		}
	}
	out.Reset()
	if code := info(nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "distinct)") {
		t.Errorf("all providers: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := info([]string{"stray"}, &out, &errb); code != 2 {
		t.Errorf("stray argument: exit %d", code)
	}
}
