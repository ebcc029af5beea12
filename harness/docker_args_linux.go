//go:build linux

package harness

// nodeArgs expands $(NAME) in a node's arguments from the environment its program gets, with the
// local runtime's rule (expandArgs), so that one NodeSpec means the same on both runtimes: the
// store's "-admin-addr=$(WIDETP_LISTEN_IP):9003" is 0.0.0.0:9003 in a container.
func nodeArgs(args []string, env map[string]string) ([]string, error) {
	return expandArgs(args, env)
}
