//go:build !linux

package harness

import "errors"

// nodeArgs: the harness identifies its runs' owners through /proc (labels.go), so it runs on
// Linux only; elsewhere no node starts.
func nodeArgs(args []string, env map[string]string) ([]string, error) {
	return nil, errors.New("the harness needs Linux")
}
