//go:build linux

package local

import (
	"net/netip"
	"path/filepath"
	"sort"

	"github.com/widetp/widetp/internal/nodeapi"
	"github.com/widetp/widetp/internal/runtimes"
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
		"HOME":               root,
		"TMPDIR":             filepath.Join(root, "tmp"),
		runtimes.EnvHost:     host,
		runtimes.EnvIPCRoot:  root,
		runtimes.EnvListenIP: addr.String(),
		EnvHosts:             hosts,
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
