package pmi

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// FormatMsg2 encodes m (the same Msg type as PMI-1 lines; on the wire a
// PMI-2 command is "cmd=NAME;k=v;...;") as a PMI-2 message with its 6-character length
// prefix. A ';' inside a key's value is doubled.
func FormatMsg2(m Msg) string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(escape2(m.Cmd))
	b.WriteByte(';')
	for i, k := range m.Keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(escape2(m.Vals[i]))
		b.WriteByte(';')
	}
	body := b.String()
	return fmt.Sprintf("%-6d", len(body)) + body
}

func escape2(s string) string { return strings.ReplaceAll(s, ";", ";;") }

// ParseMsg2 decodes the body of a PMI-2 message (without the length prefix).
// ";;" inside a value stands for one ';'. The first pair must be cmd=.
func ParseMsg2(body string) (Msg, error) {
	var m Msg
	first := true
	for len(body) > 0 {
		eq := strings.IndexByte(body, '=')
		if eq <= 0 {
			return Msg{}, fmt.Errorf("%w: PMI-2 field without key=value in %q", ErrProtocol, trim(body))
		}
		key := body[:eq]
		if strings.ContainsAny(key, ";") {
			return Msg{}, fmt.Errorf("%w: PMI-2 key %q contains ';'", ErrProtocol, trim(key))
		}
		rest := body[eq+1:]
		var val strings.Builder
		i := 0
		for i < len(rest) {
			if rest[i] == ';' {
				if i+1 < len(rest) && rest[i+1] == ';' {
					val.WriteByte(';')
					i += 2
					continue
				}
				i++
				break
			}
			val.WriteByte(rest[i])
			i++
		}
		body = rest[i:]
		if first {
			if key != "cmd" {
				return Msg{}, fmt.Errorf("%w: PMI-2 message does not start with cmd=", ErrProtocol)
			}
			m.Cmd = val.String()
			first = false
			continue
		}
		m.Keys = append(m.Keys, key)
		m.Vals = append(m.Vals, val.String())
	}
	if first || m.Cmd == "" {
		return Msg{}, fmt.Errorf("%w: empty PMI-2 message", ErrProtocol)
	}
	return m, nil
}

// readMsg2 reads one length-prefixed PMI-2 message.
func readMsg2(r *bufio.Reader) (Msg, error) {
	var hdr [6]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Msg{}, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hdr[:])))
	if err != nil || n <= 0 || n > MaxLine {
		return Msg{}, fmt.Errorf("%w: bad PMI-2 length prefix %q", ErrProtocol, string(hdr[:]))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return Msg{}, fmt.Errorf("%w: short PMI-2 message: %v", ErrProtocol, err)
	}
	return ParseMsg2(string(body))
}
