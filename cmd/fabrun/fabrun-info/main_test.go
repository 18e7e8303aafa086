package main

import (
	"bytes"
	"regexp"
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

// TestInfoSettings: fabrun info prints each setting with its value and
// source (default, env, option) and fails on an invalid one.
func TestInfoSettings(t *testing.T) {
	t.Setenv("WEFT_EAGER_LIMIT", "64K")
	t.Setenv("WEFT_CQ_SIZE", "")
	var out, errb bytes.Buffer
	if code := info([]string{"--provider", "shm"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  WEFT_EAGER_LIMIT +64K +env$`),
		regexp.MustCompile(`(?m)^  WEFT_CQ_SIZE +1024 +default$`),
		regexp.MustCompile(`(?m)^  WEFT_PROVIDER +shm +option$`),
		regexp.MustCompile(`(?m)^  WEFT_TUNE pollpace +1 +default$`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("no line matching %s in:\n%s", want, out.String())
		}
	}
	t.Setenv("WEFT_ONESIDED_WAIT", "sometimes")
	out.Reset()
	errb.Reset()
	if code := info([]string{"--provider", "shm"}, &out, &errb); code != 1 || !strings.Contains(out.String(), "INVALID: WEFT_ONESIDED_WAIT=\"sometimes\": want one of auto, spin, yield") {
		t.Errorf("invalid setting: exit %d\n%s%s", code, out.String(), errb.String())
	}
}
