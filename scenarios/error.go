package scenarios

import (
	"fmt"
	"strings"
)

// Error is a problem in a scenario file at a line and field, printed the way compilers print
// positions so that editors can jump to it: `scenarios/x.yaml:12: nodes[1].host: "R0" is not a DNS
// label`. The lines of a message of several lines after its first are indented.
type Error struct {
	File string
	// Line is 1-based; 0 when the problem has no line (an unreadable file).
	Line int
	// Field is the path of the field, like nodes[1].commands[0]; "" for the file as a whole.
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	// A message of several lines (vLLM's own, quoted) keeps its lines indented under the first, so
	// that a line starting with a file name always starts a new error.
	b.WriteString(strings.ReplaceAll(strings.TrimRight(e.Msg, "\n"), "\n", "\n    "))
	return b.String()
}
