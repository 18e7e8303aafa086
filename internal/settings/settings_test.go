package settings

import (
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the tables of README.md and docs/tuning.md")

// checkDoc compares the generated table in path with table (or rewrites it
// with -update).
func checkDoc(t *testing.T, path, table string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, ok := Splice(string(b), table)
	if !ok {
		t.Fatalf("%s has no settings table markers (%q ... %q)", path, BeginMark, EndMark)
	}
	if out == string(b) {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's settings table differs from the registry; run go test ./internal/settings -run Doc -update", path)
}

// TestREADMEDoc: README.md's settings table is the registry's.
func TestREADMEDoc(t *testing.T) { checkDoc(t, "../../README.md", READMETable()) }

// TestTuningDoc: docs/tuning.md's table is the knobs'.
func TestTuningDoc(t *testing.T) { checkDoc(t, "../../docs/tuning.md", TuneTable()) }

// TestRegistryDefaults: every default parses and lies in range, and names
// are unique.
func TestRegistryDefaults(t *testing.T) {
	seen := map[string]bool{}
	for i := range Registry {
		s := &Registry[i]
		if seen[s.Env] || !strings.HasPrefix(s.Env, "WEFT_") || s.Doc == "" {
			t.Errorf("%s: duplicate, badly named or undocumented", s.Env)
		}
		seen[s.Env] = true
		t.Setenv(s.Env, "")
		if err := s.check(); err != nil && s.Default != "" {
			t.Errorf("%s: default %q: %v", s.Env, s.Default, err)
		}
	}
	d := Defaults()
	for i := range Knobs {
		k := &Knobs[i]
		if seen[k.Key] || k.Doc == "" {
			t.Errorf("knob %s: duplicate or undocumented", k.Key)
		}
		seen[k.Key] = true
		if got := d.format(k); got != k.Default && !(k.Kind == Duration && got == "1ms" && k.Default == "1ms") {
			if n, err := ParseInt(k.Default); err != nil || FormatInt(n) != got {
				t.Errorf("knob %s: default %q formats as %q", k.Key, k.Default, got)
			}
		}
	}
}

func TestParseTune(t *testing.T) {
	tu, err := ParseTune(" pollpace=2, jitchunk=64K,pollyield=250us,hugepages=off,osspin=1e9,jitisa=AVX2 ")
	if err != nil {
		t.Fatal(err)
	}
	if tu.PollPace != 2 || tu.JITChunk != 64<<10 || tu.PollYield != 250*time.Microsecond || tu.HugePages || tu.OSSpin != 1e9 || tu.JITISA != "avx2" {
		t.Fatalf("parsed %+v", tu)
	}
	if tu.EPSpin != 16 || tu.JITRTSmall != Auto || !tu.JITPair {
		t.Fatalf("defaults lost: %+v", tu)
	}
	if got := tu.String(); got != "pollpace=2,jitchunk=64K,pollyield=250µs,hugepages=0,osspin=1000000000,jitisa=avx2" {
		t.Errorf("String = %q", got)
	}
	for _, bad := range []string{"pollpace=9", "pollpace=-1", "pollpace", "nosuch=1", "jitchunk=1k", "pollyield=soon", "hugepages=maybe", "jitisa=mmx", "pollpace=1,pollpace=2", "jitrtsmall=auto5"} {
		_, err := ParseTune(bad)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), "WEFT_TUNE") || e.Want == "" {
			t.Errorf("WEFT_TUNE=%q: %v, want an *Error naming WEFT_TUNE and the allowed values", bad, err)
		}
	}
	if _, err := ParseTune("jitrtsmall=auto,osspinfor=auto"); err != nil {
		t.Errorf("auto: %v", err)
	}
	s, err := Defaults().Set("epspin", "4")
	if err != nil || s.EPSpin != 4 || Defaults().EPSpin != 16 {
		t.Errorf("Set: %v %v", s, err)
	}
}

func TestValues(t *testing.T) {
	t.Setenv("WEFT_EAGER_LIMIT", "64K")
	if n, src, err := IntValue("WEFT_EAGER_LIMIT"); n != 64<<10 || src != FromEnv || err != nil {
		t.Errorf("64K: %d %s %v", n, src, err)
	}
	t.Setenv("WEFT_EAGER_LIMIT", "")
	if n, src, err := IntValue("WEFT_EAGER_LIMIT"); n != 16<<10 || src != FromDefault || err != nil {
		t.Errorf("default: %d %s %v", n, src, err)
	}
	t.Setenv("WEFT_EAGER_LIMIT", "2G")
	if _, _, err := IntValue("WEFT_EAGER_LIMIT"); err == nil || !strings.Contains(err.Error(), "32..1G") {
		t.Errorf("2G: %v", err)
	}
	t.Setenv("WEFT_EAGER_LIMIT", "")
	t.Setenv("WEFT_FASTCALL", "1")
	if v, _, err := Str("WEFT_FASTCALL"); v != "on" || err != nil {
		t.Errorf("alias: %q %v", v, err)
	}
	t.Setenv("WEFT_FASTCALL", "fast")
	if err := Check("fabric"); err == nil || !strings.Contains(err.Error(), "auto, on, off") {
		t.Errorf("Check: %v", err)
	}
	if err := Check("endpoint"); err != nil {
		t.Errorf("Check(endpoint) looked at fabric's variable: %v", err)
	}
	vals := Effective(map[string]string{"WEFT_PROVIDER": "tcp"})
	var prov, fc *Value
	for i := range vals {
		switch vals[i].Name {
		case "WEFT_PROVIDER":
			prov = &vals[i]
		case "WEFT_FASTCALL":
			fc = &vals[i]
		}
	}
	if prov == nil || prov.Source != FromOption || prov.Value != "tcp" || fc == nil || fc.Err == nil {
		t.Errorf("Effective: %+v %+v", prov, fc)
	}
	for _, s := range []string{"1M", "0x10", "1e3", "-5", "12KiB"} {
		if _, err := ParseInt(s); err != nil {
			t.Errorf("ParseInt(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "1.5", "K", "9999999T", "1e30"} {
		if _, err := ParseInt(s); err == nil {
			t.Errorf("ParseInt(%q) accepted", s)
		}
	}
}
