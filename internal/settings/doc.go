package settings

import (
	"fmt"
	"strings"
)

// Markers around the generated tables in README.md and docs/tuning.md.
const (
	BeginMark = "<!-- settings table: generated from internal/settings, do not edit -->"
	EndMark   = "<!-- end of settings table -->"
)

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func showDefault(d string) string {
	if d == "" {
		return "(none)"
	}
	return "`" + d + "`"
}

// READMETable renders the registry as the Markdown tables of README.md:
// the library's settings, then fabrun's.
func READMETable() string {
	var b strings.Builder
	b.WriteString("| variable | values | default | option | meaning |\n|---|---|---|---|---|\n")
	row := func(s *Setting) {
		vals := s.Want()
		if s.Kind == String {
			vals = "text"
		}
		opt := s.Option
		if opt == "" {
			opt = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", s.Env, cell(vals), cell(showDefault(s.Default)), cell(opt), cell(s.Doc))
	}
	for i := range Registry {
		if Registry[i].Package != "fabrun" {
			row(&Registry[i])
		}
	}
	b.WriteString("\nfabrun's own (each the default of the flag named):\n\n")
	b.WriteString("| variable | values | default | flag | meaning |\n|---|---|---|---|---|\n")
	for i := range Registry {
		if Registry[i].Package == "fabrun" {
			row(&Registry[i])
		}
	}
	return b.String()
}

// TuneTable renders the knobs as the Markdown table of docs/tuning.md.
func TuneTable() string {
	var b strings.Builder
	b.WriteString("| key | package | values | default | replaces | meaning |\n|---|---|---|---|---|---|\n")
	for i := range Knobs {
		k := &Knobs[i]
		old := "—"
		if k.Old != "" {
			old = "`" + k.Old + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.Key, k.Pkg, cell(k.Want()), cell(showDefault(k.Default)), old, cell(k.Doc))
	}
	return b.String()
}

// Splice replaces the text between BeginMark and EndMark in doc with table;
// ok is false when the markers are missing.
func Splice(doc, table string) (out string, ok bool) {
	i := strings.Index(doc, BeginMark)
	j := strings.Index(doc, EndMark)
	if i < 0 || j < i {
		return doc, false
	}
	return doc[:i+len(BeginMark)] + "\n" + table + doc[j:], true
}
