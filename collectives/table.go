package collectives

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/weft-hpc/weft/internal/settings"
)

// tableMagic is the first line of a table file, with its format version.
const tableMagic = "weft-colltable 1"

// Table is a measured selection table: per collective and communicator
// size, the algorithm to use from each message size on. Tune makes one
// by timing every algorithm on a communicator; WriteTo and ParseTable
// store and read it, and WithTable or WEFT_COLL_TABLE give it to New. A
// table replaces the size thresholds (the defaults and WithThreshold's
// absence) for the collectives and communicator sizes it covers, and
// only for those; a forced algorithm still wins.
//
// The text form, one rule per line after the header, "#" comments:
//
//	weft-colltable 1
//	allreduce 4 0 recdbl 8192 rabenseifner
//
// reads: Allreduce on 4 ranks uses recursive doubling from 0 bytes on
// and Rabenseifner from 8 KiB on. Sizes count what the thresholds count
// for that collective (docs/collectives.md): the message, one rank's
// block, or the whole result.
type Table struct {
	rules map[tableKey][]TableStep
}

type tableKey struct {
	k Collective
	p int
}

// TableStep is one step of a rule: the algorithm from a size on.
type TableStep struct {
	From      int // bytes
	Algorithm Algorithm
}

// Set makes the rule for collective k on p ranks: steps in increasing
// size order, the first from 0, each algorithm one k has.
func (t *Table) Set(k Collective, p int, steps []TableStep) error {
	if t == nil {
		return fmt.Errorf("collectives: table: Set on a nil table: %w", ErrInvalid)
	}
	if k == 0 || k >= numColl {
		return fmt.Errorf("collectives: table: unknown %v: %w", k, ErrInvalid)
	}
	if p < 1 {
		return fmt.Errorf("collectives: table: %s on %d ranks: %w", k, p, ErrInvalid)
	}
	if len(steps) == 0 || steps[0].From != 0 {
		return fmt.Errorf("collectives: table: %s on %d ranks: the first step must start at 0 bytes: %w", k, p, ErrInvalid)
	}
	for i, s := range steps {
		if s.Algorithm == Auto || !hasAlg(k, s.Algorithm) {
			return fmt.Errorf("collectives: table: %s has no algorithm %s: %w", k, s.Algorithm, ErrInvalid)
		}
		if i > 0 && s.From <= steps[i-1].From {
			return fmt.Errorf("collectives: table: %s on %d ranks: sizes %d, %d not increasing: %w", k, p, steps[i-1].From, s.From, ErrInvalid)
		}
	}
	if t.rules == nil {
		t.rules = map[tableKey][]TableStep{}
	}
	t.rules[tableKey{k, p}] = slices.Clone(steps)
	return nil
}

// Rule returns the steps for collective k on p ranks, or nil.
func (t *Table) Rule(k Collective, p int) []TableStep {
	if t == nil {
		return nil
	}
	return slices.Clone(t.rules[tableKey{k, p}])
}

// lookup returns the algorithm the table gives k for nbytes on p ranks.
func (t *Table) lookup(k Collective, nbytes, p int) (Algorithm, bool) {
	if t == nil {
		return Auto, false
	}
	steps := t.rules[tableKey{k, p}]
	a := Auto
	for _, s := range steps {
		if nbytes < s.From {
			break
		}
		a = s.Algorithm
	}
	return a, a != Auto
}

// WriteTo writes the table in its text form, rules sorted by collective
// and size (a nil table: the header alone).
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	if t == nil {
		t = &Table{}
	}
	var b strings.Builder
	b.WriteString(tableMagic + "\n")
	b.WriteString("# collective ranks (from-bytes algorithm)...: see collectives.Table\n")
	keys := make([]tableKey, 0, len(t.rules))
	for key := range t.rules {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b tableKey) int {
		if a.k != b.k {
			return int(a.k) - int(b.k)
		}
		return a.p - b.p
	})
	for _, key := range keys {
		fmt.Fprintf(&b, "%s %d", key.k, key.p)
		for _, s := range t.rules[key] {
			fmt.Fprintf(&b, " %d %s", s.From, s.Algorithm)
		}
		b.WriteByte('\n')
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// ParseTable reads a table in the text form WriteTo writes. A table that
// does not parse is an error wrapping ErrInvalid that names the line.
func ParseTable(r io.Reader) (*Table, error) {
	t := &Table{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = strings.TrimSpace(text[:i])
		}
		if line == 1 {
			if strings.Join(strings.Fields(text), " ") != tableMagic {
				return nil, fmt.Errorf("collectives: table: line 1 is %q, want %q: %w", text, tableMagic, ErrInvalid)
			}
			continue
		}
		if text == "" {
			continue
		}
		if err := t.parseRule(strings.Fields(text)); err != nil {
			return nil, fmt.Errorf("collectives: table line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("collectives: table: %w", err)
	}
	if line == 0 {
		return nil, fmt.Errorf("collectives: table: empty, want %q first: %w", tableMagic, ErrInvalid)
	}
	return t, nil
}

func (t *Table) parseRule(f []string) error {
	if len(f) < 4 || len(f)%2 != 0 {
		return fmt.Errorf("%q: want COLLECTIVE RANKS FROM ALGORITHM [FROM ALGORITHM]...: %w", strings.Join(f, " "), ErrInvalid)
	}
	k := Collective(0)
	for i := CollBarrier; i < numColl; i++ {
		if collNames[i] == strings.ToLower(f[0]) {
			k = i
		}
	}
	if k == 0 {
		return fmt.Errorf("unknown collective %q: %w", f[0], ErrInvalid)
	}
	p, err := strconv.Atoi(f[1])
	if err != nil {
		return fmt.Errorf("ranks %q: %w", f[1], ErrInvalid)
	}
	var steps []TableStep
	for i := 2; i < len(f); i += 2 {
		from, err := settings.ParseInt(f[i])
		if err != nil || from < 0 || from > 1<<50 {
			return fmt.Errorf("size %q: %w", f[i], ErrInvalid)
		}
		a, err := ParseAlgorithm(k, f[i+1])
		if err != nil {
			return err
		}
		steps = append(steps, TableStep{From: int(from), Algorithm: a})
	}
	return t.Set(k, p, steps)
}

// LoadTable reads the table file path (ParseTable).
func LoadTable(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("collectives: table: %w: %w", err, ErrInvalid)
	}
	defer f.Close()
	t, err := ParseTable(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// envTable is WEFT_COLL_TABLE's table, read once per path.
var envTable struct {
	mu   sync.Mutex
	path string
	t    *Table
	err  error
}

func tableFromEnv() (*Table, error) {
	path, _, err := settings.Str(EnvTable)
	if err != nil || path == "" {
		return nil, err
	}
	envTable.mu.Lock()
	defer envTable.mu.Unlock()
	if envTable.path != path {
		envTable.path = path
		envTable.t, envTable.err = LoadTable(path)
		if envTable.err != nil {
			envTable.err = fmt.Errorf("%s: %w", EnvTable, envTable.err)
		}
	}
	return envTable.t, envTable.err
}

// WithTable makes the handle select algorithms by t where it has a rule
// (see Table); nil: none. Default: the table of WEFT_COLL_TABLE.
func WithTable(t *Table) Option {
	return func(c *config) error { c.table = t; return nil }
}
