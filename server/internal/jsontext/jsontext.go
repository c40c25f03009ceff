// Package jsontext writes Go strings as JSON strings, byte for byte as one of the standard
// library's encoders writes them, for the hand-written encoders of hot paths (a trip's
// answer, a request's log line) whose output must not differ from the encoder they replace.
package jsontext

import "unicode/utf8"

// Escaping is the way one of the standard library's encoders escapes a string.
type Escaping struct {
	// plain holds the ASCII bytes written as they are.
	plain [utf8.RuneSelf]bool
	// shortBF writes backspace and form feed as \b and \f rather than \u0008 and \u000c.
	shortBF bool
}

var (
	// EncodingJSON escapes as encoding/json does by default (json.Marshal, and an Encoder
	// with HTML escaping): quotes, backslashes, control characters, and <, > and &.
	EncodingJSON = newEscaping("<>&", true)
	// Slog escapes as log/slog's JSON handler does: quotes, backslashes and control
	// characters, with HTML left alone.
	Slog = newEscaping("", false)
)

func newEscaping(escapedToo string, shortBF bool) *Escaping {
	e := &Escaping{shortBF: shortBF}
	for c := 0x20; c < utf8.RuneSelf; c++ {
		e.plain[c] = c != '"' && c != '\\'
	}
	for i := range len(escapedToo) {
		e.plain[escapedToo[i]] = false
	}
	return e
}

// AppendString appends s quoted and escaped as e's encoder writes it: every invalid UTF-8
// byte as U+FFFD, U+2028 and U+2029 escaped, everything else as it is.
func (e *Escaping) AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if e.plain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b' && e.shortBF:
				b = append(b, '\\', 'b')
			case c == '\f' && e.shortBF:
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
