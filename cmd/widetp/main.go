// Command widetp reproduces multi-node vLLM deployments on one machine and checks that their
// processes agree on who they are and where they listen. See README.md.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
