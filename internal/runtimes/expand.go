package runtimes

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// ExpandArgs replaces $(NAME) in every argument by the host's variable NAME, as Kubernetes
// expands a container's args: a program that takes its listen address as a flag (the fake store's
// --metadata-addr) is given "$(WIDETP_LISTEN_IP):8080", which the harness cannot spell before the
// host has an address. "$$" is a literal "$". A reference to a variable the host does not have is
// an error, not an empty string: a store listening on ":8080" would collide with parallel runs.
func ExpandArgs(args []string, env map[string]string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		v, err := expandArg(a, env)
		if err != nil {
			return nil, fmt.Errorf("argument %d %q: %w", i+1, a, err)
		}
		out[i] = v
	}
	return out, nil
}

func expandArg(s string, env map[string]string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				return "", fmt.Errorf("$( at byte %d is not closed", i)
			}
			name := s[i+2 : i+2+end]
			if !envName().MatchString(name) {
				return "", fmt.Errorf("$(%s) at byte %d: not a variable name", name, i)
			}
			v, ok := env[name]
			if !ok {
				return "", fmt.Errorf("$(%s): no such variable in the host's environment", name)
			}
			b.WriteString(v)
			i += end + 3
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), nil
}
