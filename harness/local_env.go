//go:build linux

package harness

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/widetp/widetp/internal/nodeapi"
)

// EnvHosts maps host names to addresses for a local run ("r0-head=127.4.9.2,store=127.4.9.1"):
// there is no DNS for local hosts, so simnode (simnode.EnvHosts) resolves peers through it.
const EnvHosts = nodeapi.EnvHosts

// localPath is the PATH a Docker container gets when its image sets none: a host sees the same
// on both runtimes, not the harness user's PATH.
const localPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// localEnv is a host's whole environment. Nothing of the harness's own environment is passed:
// a container inherits none of it either, and simnode hands every VLLM_* variable it sees to
// the model, so a stray one in the user's shell would change what the run reproduces.
func localEnv(host string, addr netip.Addr, root, hosts string, spec map[string]string) map[string]string {
	env := map[string]string{
		"PATH":     localPath,
		"HOSTNAME": host,
		// The host's own directory as home, and its private /tmp as the temp directory: what
		// a program writes lands on its "machine", not in the user's home or the shared /tmp.
		"HOME":      root,
		"TMPDIR":    filepath.Join(root, "tmp"),
		EnvHost:     host,
		EnvIPCRoot:  root,
		EnvListenIP: addr.String(),
		EnvHosts:    hosts,
	}
	for k, v := range spec {
		env[k] = v
	}
	return env
}

// envList is env as exec wants it, sorted so that Inspect reads the same every time.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expandArgs replaces $(NAME) in every argument by the host's variable NAME, as Kubernetes
// expands a container's args: a program that takes its listen address as a flag (the fake store's
// --metadata-addr) is given "$(WIDETP_LISTEN_IP):8080", which the harness cannot spell before the
// host has an address. "$$" is a literal "$". A reference to a variable the host does not have is
// an error, not an empty string: a store listening on ":8080" would collide with parallel runs.
func expandArgs(args []string, env map[string]string) ([]string, error) {
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
			if !envName.MatchString(name) {
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
