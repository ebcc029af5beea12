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

// token is one shell token: a word, or an unquoted operator (`&`, `&&`, `;`, `|`, `||`) or
// redirection operator (`>`, `>>`, `<`, `>&`, `&>`, with a leading file descriptor number).
type token struct {
	text string
	op   bool
}

// splitWords splits a simple command into words the way a POSIX shell does; see tokenize.
// Operators come back as words: callers that care use splitCommands.
func splitWords(line string) ([]string, error) {
	toks, err := tokenize(line)
	if err != nil {
		return nil, err
	}
	words := make([]string, len(toks))
	for i, t := range toks {
		words[i] = t.text
	}
	return words, nil
}

// tokenize splits a command line into tokens the way a POSIX shell does: blanks separate words,
// single quotes keep everything literally, double quotes keep everything but `\"`, `\\`, `\$`
// and “ \` “, and a backslash outside quotes escapes the next character (a backslash-newline is
// a line continuation). Unquoted control and redirection operators are tokens of their own.
// Expansions ($VAR, globs, ~) are not performed: scenario files hold the literal command a user
// pasted, and the model must not invent values.
func tokenize(line string) ([]token, error) {
	var (
		toks    []token
		cur     strings.Builder
		inWord  bool
		quoted  bool
		quoteAt int
	)
	flush := func() {
		if inWord {
			toks = append(toks, token{text: cur.String()})
			cur.Reset()
			inWord, quoted = false, false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			flush()
		case '#':
			if inWord {
				cur.WriteByte(c)
				continue
			}
			// A comment runs to the end of the line.
			for i+1 < len(line) && line[i+1] != '\n' {
				i++
			}
		case '&', ';', '|', '>', '<':
			// A word of digits right before a redirection is its file descriptor (2>&1).
			fd := ""
			if (c == '>' || c == '<') && inWord && !quoted && isDigits(cur.String()) {
				fd = cur.String()
				cur.Reset()
				inWord = false
			}
			flush()
			op := string(c)
			if i+1 < len(line) {
				switch two := line[i : i+2]; two {
				case "&&", "||", ">>", ">&", "&>", "<&":
					op = two
					i++
				}
			}
			if op == "&>" && i+1 < len(line) && line[i+1] == '>' {
				op = "&>>"
				i++
			}
			toks = append(toks, token{text: fd + op, op: true})
		case '\\':
			if i+1 >= len(line) {
				return nil, &ShellError{Offset: i, Reason: "backslash at end of command line"}
			}
			i++
			if line[i] == '\n' {
				continue // line continuation joins the two lines
			}
			cur.WriteByte(line[i])
			inWord, quoted = true, true
		case '\'':
			quoteAt = i
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, &ShellError{Offset: quoteAt, Reason: "unterminated single quote"}
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord, quoted = true, true
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
			inWord, quoted = true, true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return toks, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// splitCommands splits a command line into its simple commands as a shell runs them: control
// operators (`&`, `&&`, `;`, `|`, `||`) end a command, and redirections (`> log 2>&1`, `< in`)
// are removed with their targets, since they change where output goes, not what vLLM is told.
// A redirection without a target, or a control operator with no command before it, is a shell
// syntax error.
func splitCommands(line string) ([][]string, error) {
	toks, err := tokenize(line)
	if err != nil {
		return nil, err
	}
	var cmds [][]string
	var cur []string
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !t.op {
			cur = append(cur, t.text)
			continue
		}
		op := strings.TrimLeft(t.text, "0123456789")
		switch op {
		case "&", "&&", ";", "|", "||":
			if len(cur) == 0 {
				return nil, &ShellError{Reason: fmt.Sprintf("syntax error near unexpected token `%s'", t.text)}
			}
			cmds = append(cmds, cur)
			cur = nil
		default: // a redirection: drop it and its target word
			if i+1 >= len(toks) || toks[i+1].op {
				return nil, &ShellError{Reason: fmt.Sprintf("syntax error: redirection `%s' without a target", t.text)}
			}
			i++
		}
	}
	if len(cur) > 0 {
		cmds = append(cmds, cur)
	}
	return cmds, nil
}
