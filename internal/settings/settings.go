// Package settings is weft's one registry of configuration: the
// user-facing settings (each an environment variable and, where the reading
// package has options, a functional option) and the tuning knobs, all given
// through the single variable WEFT_TUNE.
//
// Every value is parsed and validated by this package, the same way for all
// packages: a value that does not parse or lies outside the allowed range is
// an error (*Error) naming the variable and the allowed values. The reading
// package returns it from its entry point (fabric.Select and GetInfo,
// endpoint.Init and CreateEndpoints, onesided's window creation, ddt's
// Commit), wrapped around that package's ErrInvalid; nothing falls back to a
// default with a warning.
//
// Registry lists the user-facing settings; README.md's "Settings" table is
// checked against it by a test. Knobs lists the tuning knobs; docs/tuning.md
// documents them and is checked the same way.
package settings

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Kind is the type of a setting's value.
type Kind int

// Kinds of values.
const (
	// String is free text (a provider name, a directory).
	String Kind = iota
	// Enum is one of the setting's Allowed words (case-insensitive).
	Enum
	// Bool is true or false (also 1/0, on/off, yes/no).
	Bool
	// Int is an integer in [Min, Max]; K, M, G and T suffixes multiply by
	// powers of 1024 and "1e9" notation is accepted.
	Int
	// Duration is a Go duration ("90s", "250us") in [Min, Max] nanoseconds.
	Duration
)

// String names the kind as the documentation does.
func (k Kind) String() string {
	switch k {
	case String:
		return "string"
	case Enum:
		return "enum"
	case Bool:
		return "bool"
	case Int:
		return "int"
	case Duration:
		return "duration"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Source says where an effective value came from.
type Source string

// Sources of a value.
const (
	FromDefault Source = "default"
	FromEnv     Source = "env"
	FromOption  Source = "option"
)

// Setting describes one user-facing setting.
type Setting struct {
	Env     string   // environment variable
	Package string   // the package (or command) that reads it
	Kind    Kind     // value type
	Default string   // default, as written in the environment ("" for none)
	Allowed []string // Enum: the accepted words, canonical spelling first
	Min     int64    // Int, Duration: smallest accepted value
	Max     int64    // Int, Duration: largest accepted value
	Option  string   // the functional option or flag that overrides it ("" for none)
	Doc     string   // one line
}

// Want describes the allowed values, for error messages and the docs.
func (s *Setting) Want() string { return want(s.Kind, s.Allowed, s.Min, s.Max) }

func want(k Kind, allowed []string, lo, hi int64) string {
	switch k {
	case Enum:
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i], _, _ = strings.Cut(a, "|")
		}
		return "one of " + strings.Join(names, ", ")
	case Bool:
		return "true or false"
	case Int:
		return fmt.Sprintf("an integer in %s..%s", FormatInt(lo), FormatInt(hi))
	case Duration:
		return fmt.Sprintf("a duration in %v..%v", time.Duration(lo), time.Duration(hi))
	}
	return "any text"
}

// Error is a value that does not parse or is out of range.
type Error struct {
	Name  string // the variable, or "WEFT_TUNE key"
	Value string
	Want  string // the allowed values
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s=%q: want %s", e.Name, e.Value, e.Want)
}

// Lookup returns the registry entry of the variable env, or nil.
func Lookup(env string) *Setting {
	for i := range Registry {
		if Registry[i].Env == env {
			return &Registry[i]
		}
	}
	return nil
}

func mustLookup(env string) *Setting {
	s := Lookup(env)
	if s == nil {
		panic("settings: " + env + " is not in the registry") // a programming error in weft itself
	}
	return s
}

// raw returns the environment value of env and its source.
func raw(env string) (string, Source) {
	v, ok := os.LookupEnv(env)
	if !ok || strings.TrimSpace(v) == "" {
		return mustLookup(env).Default, FromDefault
	}
	return strings.TrimSpace(v), FromEnv
}

// Str returns the value of a String or Enum setting (Enum values in their
// canonical spelling, the first of each alias group in Allowed).
func Str(env string) (string, Source, error) {
	s := mustLookup(env)
	v, src := raw(env)
	if s.Kind != Enum {
		return v, src, nil
	}
	w, err := parseEnum(v, s.Allowed)
	if err != nil {
		return s.Default, src, &Error{Name: env, Value: v, Want: s.Want()}
	}
	return w, src, nil
}

// IntValue returns the value of an Int setting.
func IntValue(env string) (int64, Source, error) {
	s := mustLookup(env)
	v, src := raw(env)
	n, err := ParseInt(v)
	if err != nil || n < s.Min || n > s.Max {
		d, _ := ParseInt(s.Default)
		return d, src, &Error{Name: env, Value: v, Want: s.Want()}
	}
	return n, src, nil
}

// DurationValue returns the value of a Duration setting.
func DurationValue(env string) (time.Duration, Source, error) {
	s := mustLookup(env)
	v, src := raw(env)
	d, err := time.ParseDuration(v)
	if err != nil || int64(d) < s.Min || int64(d) > s.Max {
		def, _ := time.ParseDuration(s.Default)
		return def, src, &Error{Name: env, Value: v, Want: s.Want()}
	}
	return d, src, nil
}

// BoolValue returns the value of a Bool setting.
func BoolValue(env string) (bool, Source, error) {
	v, src := raw(env)
	b, err := ParseBool(v)
	if err != nil {
		d, _ := ParseBool(mustLookup(env).Default)
		return d, src, &Error{Name: env, Value: v, Want: "true or false"}
	}
	return b, src, nil
}

// check validates the environment value of s.
func (s *Setting) check() error {
	var err error
	switch s.Kind {
	case String, Enum:
		_, _, err = Str(s.Env)
	case Int:
		_, _, err = IntValue(s.Env)
	case Duration:
		_, _, err = DurationValue(s.Env)
	case Bool:
		_, _, err = BoolValue(s.Env)
	}
	return err
}

// Check validates the library settings read by pkg (fabric, endpoint, ...;
// "" for all library packages) and WEFT_TUNE, and returns the first error.
// fabrun's own variables are left to fabrun.
func Check(pkg string) error {
	for i := range Registry {
		s := &Registry[i]
		if s.Package == "fabrun" || (pkg != "" && s.Package != pkg) {
			continue
		}
		if err := s.check(); err != nil {
			return err
		}
	}
	_, err := ParseTune(os.Getenv(TuneEnv)) // not Tune's cached parse: the environment may have changed
	return err
}

// Value is one effective setting, for fabrun info.
type Value struct {
	Name   string // variable (or WEFT_TUNE key)
	Value  string
	Source Source
	Err    error // the value does not parse (Value is then the raw text)
}

// Effective lists every library setting of the registry and every tuning
// knob with its effective value and source. overrides maps variable names
// (or tuning keys) to values given as options or flags; they are shown with
// source "option".
func Effective(overrides map[string]string) []Value {
	var out []Value
	for i := range Registry {
		s := &Registry[i]
		if s.Package == "fabrun" {
			continue
		}
		if v, ok := overrides[s.Env]; ok {
			out = append(out, Value{Name: s.Env, Value: v, Source: FromOption})
			continue
		}
		v, src := raw(s.Env)
		out = append(out, Value{Name: s.Env, Value: v, Source: src, Err: s.check()})
	}
	t, err := Tune()
	set := map[string]bool{}
	if err == nil {
		for _, k := range t.set {
			set[k] = true
		}
	}
	for i := range Knobs {
		k := &Knobs[i]
		if v, ok := overrides[k.Key]; ok {
			out = append(out, Value{Name: "WEFT_TUNE " + k.Key, Value: v, Source: FromOption})
			continue
		}
		v := Value{Name: "WEFT_TUNE " + k.Key, Value: k.Default, Source: FromDefault}
		if err == nil && set[k.Key] {
			v.Value, v.Source = t.format(k), FromEnv
		}
		out = append(out, v)
	}
	if err != nil {
		out = append(out, Value{Name: "WEFT_TUNE", Value: os.Getenv(TuneEnv), Source: FromEnv, Err: err})
	}
	return out
}

// ParseInt parses a decimal or 0x integer with an optional K, M, G or T
// suffix (powers of 1024; a trailing "i" or "B" is allowed: 1MiB, 64KB), or
// a number in exponent notation with an integral value ("1e9").
func ParseInt(s string) (int64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "i")
	mul := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mul = 1 << 10
		case 'm', 'M':
			mul = 1 << 20
		case 'g', 'G':
			mul = 1 << 30
		case 't', 'T':
			mul = 1 << 40
		}
		if mul != 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 0, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(t, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<62 {
			return 0, fmt.Errorf("%q is not an integer", s)
		}
		n = int64(f)
	}
	if n > math.MaxInt64/mul || n < math.MinInt64/mul {
		return 0, fmt.Errorf("%q overflows", s)
	}
	return n * mul, nil
}

// FormatInt writes n with the largest exact binary suffix (1M, 64K).
func FormatInt(n int64) string {
	for _, u := range []struct {
		s string
		v int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n != 0 && n%u.v == 0 {
			return strconv.FormatInt(n/u.v, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseBool parses 1/0, true/false, on/off, yes/no (case-insensitive).
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "on", "yes":
		return true, nil
	case "0", "false", "off", "no":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", s)
}

// parseEnum matches v against allowed; an entry "a|b" accepts b as an alias
// of a and returns a.
func parseEnum(v string, allowed []string) (string, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	for _, a := range allowed {
		names := strings.Split(a, "|")
		for _, n := range names {
			if v == n {
				return names[0], nil
			}
		}
	}
	return "", fmt.Errorf("%q not allowed", v)
}
