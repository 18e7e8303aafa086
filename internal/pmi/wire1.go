package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxLine is the longest PMI-1 line (or PMI-2 message) accepted from a peer.
// Longer input is a protocol error rather than unbounded buffering.
const MaxLine = 64 << 10

// Errors reported by this package. They are wrapped with context; test with
// errors.Is.
var (
	// ErrProtocol marks malformed or unexpected input from the peer.
	ErrProtocol = errors.New("pmi: protocol error")
	// ErrNotFound is returned by Get when the key has not been put.
	ErrNotFound = errors.New("pmi: key not found")
	// ErrRefused marks a non-zero rc in a reply, or a refused handshake.
	ErrRefused = errors.New("pmi: request refused")
	// ErrNoLauncher is returned by the FromEnv constructors when the
	// environment names no launcher.
	ErrNoLauncher = errors.New("pmi: no launcher in the environment")
)

// Msg is one PMI-1 line: a command and its ordered key=value pairs. The cmd
// pair itself is held in Cmd, not in Keys.
type Msg struct {
	Cmd  string
	Keys []string
	Vals []string
}

// NewMsg returns a message with the given command and alternating key, value
// arguments. It panics on an odd number of kv arguments (a programming error).
func NewMsg(cmd string, kv ...string) Msg {
	if len(kv)%2 != 0 {
		panic("pmi.NewMsg: odd number of key/value arguments")
	}
	m := Msg{Cmd: cmd}
	for i := 0; i < len(kv); i += 2 {
		m.Keys = append(m.Keys, kv[i])
		m.Vals = append(m.Vals, kv[i+1])
	}
	return m
}

// Get returns the value of key k and whether it was present.
func (m Msg) Get(k string) (string, bool) {
	for i, key := range m.Keys {
		if key == k {
			return m.Vals[i], true
		}
	}
	return "", false
}

// Int returns the integer value of key k.
func (m Msg) Int(k string) (int, error) {
	v, ok := m.Get(k)
	if !ok {
		return 0, fmt.Errorf("%w: cmd=%s lacks %s", ErrProtocol, m.Cmd, k)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%w: cmd=%s %s=%q is not an integer", ErrProtocol, m.Cmd, k, v)
	}
	return n, nil
}

// String formats m as one PMI-1 line including the trailing newline.
func (m Msg) String() string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(m.Cmd)
	for i, k := range m.Keys {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m.Vals[i])
	}
	b.WriteByte('\n')
	return b.String()
}

// checkToken reports whether s can travel as a PMI key (isKey) or value:
// no whitespace or ';' at all, and no '=' in a key.
func checkToken(what string, isKey bool, s string) error {
	if s == "" && isKey {
		return fmt.Errorf("pmi: empty %s", what)
	}
	if strings.ContainsAny(s, " \t\r\n;") || isKey && strings.Contains(s, "=") {
		return fmt.Errorf("pmi: %s %q contains whitespace, ';' or '='", what, trim(s))
	}
	return nil
}

// ParseLine parses one PMI-1 line (without or with its trailing newline).
// The first pair must be cmd=... (replies from some servers use it too).
// A field without '=' continues the previous value, so a free-text msg=
// with spaces survives.
func ParseLine(line string) (Msg, error) {
	line = strings.TrimRight(line, "\r\n")
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return Msg{}, fmt.Errorf("%w: empty line", ErrProtocol)
	}
	var m Msg
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			if i == 0 || len(m.Vals) == 0 {
				return Msg{}, fmt.Errorf("%w: field %q is not key=value in %q", ErrProtocol, f, trim(line))
			}
			m.Vals[len(m.Vals)-1] += " " + f
			continue
		}
		if i == 0 {
			if k != "cmd" && k != "mcmd" {
				return Msg{}, fmt.Errorf("%w: line does not start with cmd=: %q", ErrProtocol, trim(line))
			}
			if v == "" {
				return Msg{}, fmt.Errorf("%w: empty cmd in %q", ErrProtocol, trim(line))
			}
			m.Cmd = v
			continue
		}
		m.Keys = append(m.Keys, k)
		m.Vals = append(m.Vals, v)
	}
	return m, nil
}

// trim shortens s for error messages.
func trim(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// readLine reads one newline-terminated line of at most MaxLine bytes.
func readLine(r *bufio.Reader) (string, error) { return readLineMax(r, MaxLine) }

// readLineMax reads one newline-terminated line of at most max bytes
// (newline included); longer input is a protocol error, and no more than
// max plus one buffer's worth of bytes is ever held.
func readLineMax(r *bufio.Reader, max int) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(b)+len(chunk) > max {
			return "", fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, max)
		}
		b = append(b, chunk...)
		if err == nil {
			return string(b), nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(b) > 0 {
			return "", fmt.Errorf("%w: connection closed mid-line", ErrProtocol)
		}
		return "", err
	}
}
