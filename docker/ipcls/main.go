// Command ipcls prints the listing of a directory as ipcdir JSON. It is copied into every node
// image (as /usr/local/bin/widetp-ipcls) because a FROM scratch image has no ls, and the harness
// runs it with `docker exec` since `docker cp` does not see into a container's tmpfs /tmp.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/widetp/widetp/harness/ipcdir"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: widetp-ipcls DIR")
		os.Exit(2)
	}
	l, err := ipcdir.List(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "widetp-ipcls:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(l); err != nil {
		fmt.Fprintln(os.Stderr, "widetp-ipcls: write listing:", err)
		os.Exit(1)
	}
}
