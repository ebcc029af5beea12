package vllm

import (
	"fmt"
	"strings"
)

// ShellError is a command line a POSIX shell would refuse to split (an unterminated quote or a
// trailing backslash). vLLM never sees such a line: the shell fails before `vllm` starts.
type ShellError struct {
	// Offset is the byte offset in the command line where the unterminated construct starts.
	Offset int
	Reason string
}

func (e *ShellError) Error() string {
	return fmt.Sprintf("shell: %s (at byte %d)", e.Reason, e.Offset)
}

// splitWords splits a command line into words the way a POSIX shell does for a simple command:
// blanks separate words, single quotes keep everything literally, double quotes keep everything
// but `\"`, `\\`, `\$` and “ \` “, and a backslash outside quotes escapes the next character
// (a backslash-newline is a line continuation). Expansions ($VAR, globs, ~) are not performed:
// scenario files hold the literal command a user pasted, and the model must not invent values.
func splitWords(line string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quoteAt int
	)
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			flush()
		case '\\':
			if i+1 >= len(line) {
				return nil, &ShellError{Offset: i, Reason: "backslash at end of command line"}
			}
			i++
			if line[i] == '\n' {
				continue // line continuation joins the two lines
			}
			cur.WriteByte(line[i])
			inWord = true
		case '\'':
			quoteAt = i
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, &ShellError{Offset: quoteAt, Reason: "unterminated single quote"}
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case '"':
			quoteAt = i
			closed := false
			for i++; i < len(line); i++ {
				d := line[i]
				if d == '"' {
					closed = true
					break
				}
				if d == '\\' && i+1 < len(line) {
					switch n := line[i+1]; n {
					case '"', '\\', '$', '`':
						cur.WriteByte(n)
						i++
						continue
					case '\n':
						i++
						continue
					}
				}
				cur.WriteByte(d)
			}
			if !closed {
				return nil, &ShellError{Offset: quoteAt, Reason: "unterminated double quote"}
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, nil
}
