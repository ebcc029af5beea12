// Command simnode is one simulated vLLM host of a widetp run: `simnode node` derives, with the
// vLLM model, the processes of the host's `vllm serve` lines and runs each as a real OS process
// (rendezvous over TCP, ZMQ lookup sockets, Mooncake store registration), reporting to the fake
// store. See package simnode.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/widetp/widetp/simnode"
)

const usage = `usage: simnode node [--config FILE]

Runs one simulated vLLM host until its processes exit; SIGTERM or SIGINT tears them down cleanly.

The node's JSON config comes from --config FILE, or else from $WIDETP_NODE_CONFIG:
  {"host": "r0-head", "gpus": 8, "commands": ["vllm serve ..."],
   "model": {"name": "org/Model", "moe": true}, "profile": "main",  (a name, or a vllm.Profile object)
   "env": {"VLLM_RPC_BASE_PATH": "/tmp"}, "seed": "scenario-name",
   "store": {"metadata": "http://store:8080", "master": "http://store:50052", "admin": "http://store:9003"},
   "timeouts": {"rendezvous": "60s", "lookup": "2s", "store": "5s"}}

Environment:
  WIDETP_HOST       the hostname (default: os.Hostname())
  WIDETP_IPC_ROOT   directory under which every ipc:///... path is bound (a local run's private /tmp)
  WIDETP_LISTEN_IP  address rendezvous masters and Mooncake ports bind (default 0.0.0.0)
  WIDETP_HOSTS      name=ip,... resolved before DNS (a local run)
  VLLM_*, MOONCAKE_*  passed to the model, under the config's env

Exit status: 0 clean, 1 a simulated process crashed, 2 bad input, 3 store unreachable or start failed.

(` + "`simnode " + simnode.ProcessCommand + "`" + ` is internal: one simulated process, started by its parent.)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return simnode.ExitBadInput
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case simnode.ProcessCommand:
		// fd 3 is the status pipe the parent passed in ExtraFiles; it must not leak into this
		// process's own children (their fd 3 is their own pipe).
		status := os.NewFile(3, "status")
		if fi, err := status.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			fmt.Fprintln(stderr, "simnode process: no status pipe on fd 3 (this command is started by simnode itself)")
			return simnode.ExitBadInput
		}
		closeOnExec(status)
		return simnode.RunProcess(os.Stdin, status, stderr)
	case "node":
		return node(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "simnode: unknown command %q\n\n%s", args[0], usage)
		return simnode.ExitBadInput
	}
}

func node(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simnode node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	configPath := fs.String("config", "", "node config JSON file (default: $"+simnode.EnvConfig+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return simnode.ExitBadInput
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "simnode node: unexpected arguments %q\n", fs.Args())
		return simnode.ExitBadInput
	}
	var data []byte
	src := "$" + simnode.EnvConfig
	if *configPath != "" {
		src = *configPath
		b, err := os.ReadFile(*configPath)
		if err != nil {
			fmt.Fprintf(stderr, "simnode node: read config: %v\n", err)
			return simnode.ExitBadInput
		}
		data = b
	} else if v := os.Getenv(simnode.EnvConfig); v != "" {
		data = []byte(v)
	} else {
		fmt.Fprintf(stderr, "simnode node: no config: pass --config FILE or set %s\n", simnode.EnvConfig)
		return simnode.ExitBadInput
	}
	cfg, err := simnode.ParseConfig(data, src, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "simnode node: %v\n", err)
		return simnode.ExitBadInput
	}
	rt, err := simnode.RuntimeFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "simnode node: %v\n", err)
		return simnode.ExitBadInput
	}
	code, err := simnode.RunNode(context.Background(), cfg, rt, simnode.NodeOptions{Stdout: stdout, Stderr: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "simnode node: %v\n", err)
	}
	return code
}
