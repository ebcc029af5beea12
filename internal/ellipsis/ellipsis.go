// Package ellipsis shortens text quoted in error messages (a line of /proc, a tool's output, a
// listing that did not parse), so that an error names what it read without carrying all of it.
package ellipsis

import "unicode/utf8"

// Cut returns s when it is at most n bytes long, and otherwise its first n bytes followed by "…".
// The cut never splits a UTF-8 sequence: it moves back to the start of the character it would
// cut. A negative n counts as 0.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
