package lookup

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Endpoint maps the ipc:// path vLLM computes to the endpoint this simulated host really uses.
// Several simulated hosts share one machine in a local run, so each gets a private root directory and
// binds ipc:///tmp/x at ipc://<root>/tmp/x; a host with root "" (a container) uses the path as is.
// The reported path stays the model's: only the file on disk moves.
func Endpoint(modelPath, root string) (endpoint, file string, err error) {
	const scheme = "ipc://"
	if !strings.HasPrefix(modelPath, scheme) {
		return "", "", fmt.Errorf("lookup endpoint %q: not an ipc:// path", modelPath)
	}
	file = strings.TrimPrefix(modelPath, scheme)
	if !filepath.IsAbs(file) {
		return "", "", fmt.Errorf("lookup endpoint %q: path %q is not absolute", modelPath, file)
	}
	if root != "" {
		file = filepath.Join(root, file)
	}
	// sockaddr_un holds 108 bytes including the terminator; libzmq's own error for a longer path
	// ("File name too long") would not say which path or why it grew.
	const maxUnixPath = 107
	if len(file) > maxUnixPath {
		return "", "", fmt.Errorf("lookup endpoint %q: socket file %q is %d bytes, over the %d a unix socket allows", modelPath, file, len(file), maxUnixPath)
	}
	return scheme + file, file, nil
}
