package simnode

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/widetp/widetp/internal/zmq"
)

// CommandUsage documents `widetp node`, the command every simulated host runs.
const CommandUsage = `usage: widetp node [--config FILE]

Runs one simulated vLLM host until its processes exit; SIGTERM or SIGINT tears them down cleanly.
The harness starts it on every host of a run (a container's entrypoint, or a local process tree);
it is not meant to be started by hand, but can be, with a store to report to.

The node's JSON config comes from --config FILE, or else from $WIDETP_NODE_CONFIG:
  {"host": "r0-head", "gpus": 8, "commands": ["vllm serve ..."],
   "model": {"name": "org/Model", "moe": true}, "profile": "main",  (a name, or a vllm.Profile object)
   "env": {"VLLM_RPC_BASE_PATH": "/tmp"}, "seed": "scenario-name",
   "store": {"metadata": "http://store:8080", "master": "http://store:50052", "admin": "http://store:9003"},
   "timeouts": {"rendezvous": "60s", "lookup": "2s", "store": "5s", "store_start": "30s"}}

Environment:
  WIDETP_HOST       the hostname (default: os.Hostname())
  WIDETP_IPC_ROOT   directory under which every ipc:///... path is bound (a local run's private /tmp)
  WIDETP_LISTEN_IP  address rendezvous masters and Mooncake ports bind (default 0.0.0.0)
  WIDETP_HOSTS      name=ip,... resolved before DNS (a local run)
  VLLM_*, MOONCAKE_*  passed to the model, under the config's env

Exit status: 0 clean, 1 a simulated process crashed, 2 bad input, 3 store unreachable or start failed.

` + "`widetp node " + CtlCommand + " kill|restart PROCESS`" + ` asks the node program of this host to kill one of its processes or
restart one command (widetp node ctl --help).

(` + "`node " + ProcessCommand + "`" + ` is internal: one simulated process, started by its parent.)
`

// ProcessArgs are the arguments a node re-executes its own binary with for each simulated
// process: `<binary> node process`.
var ProcessArgs = []string{"node", ProcessCommand}

// Command is `widetp node`: args are what follows "node" on the command line. It returns the exit
// status.
func Command(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "--help", "help":
			fmt.Fprint(stdout, CommandUsage)
			return 0
		case CtlCommand:
			return CtlMain(args[1:], stdout, stderr)
		case ProcessCommand:
			// fd 3 is the status pipe the parent passed in ExtraFiles; it must not leak into this
			// process's own children (their fd 3 is their own pipe).
			status := os.NewFile(3, "status")
			if fi, err := status.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
				fmt.Fprintln(stderr, "widetp node process: no status pipe on fd 3 (this command is started by a node itself)")
				return ExitBadInput
			}
			syscall.CloseOnExec(int(status.Fd()))
			return RunProcess(pollableStdin(), status, stderr)
		}
	}
	// Every simulated process binds and reaches libzmq sockets: without libzmq the node cannot
	// start, and says which package to install.
	if err := zmq.Load(); err != nil {
		fmt.Fprintf(stderr, "widetp node: %v\n", err)
		return ExitInfra
	}
	fs := flag.NewFlagSet("widetp node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, CommandUsage) }
	configPath := fs.String("config", "", "node config JSON file (default: $"+EnvConfig+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return ExitBadInput
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "widetp node: unexpected arguments %q\n", fs.Args())
		return ExitBadInput
	}
	var data []byte
	src := "$" + EnvConfig
	if *configPath != "" {
		src = *configPath
		b, err := os.ReadFile(*configPath)
		if err != nil {
			fmt.Fprintf(stderr, "widetp node: read config: %v\n", err)
			return ExitBadInput
		}
		data = b
	} else if v := os.Getenv(EnvConfig); v != "" {
		data = []byte(v)
	} else {
		fmt.Fprintf(stderr, "widetp node: no config: pass --config FILE or set %s\n", EnvConfig)
		return ExitBadInput
	}
	cfg, err := ParseConfig(data, src, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "widetp node: %v\n", err)
		return ExitBadInput
	}
	rt, err := RuntimeFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "widetp node: %v\n", err)
		return ExitBadInput
	}
	code, err := RunNode(context.Background(), cfg, rt, NodeOptions{Stdout: stdout, Stderr: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "widetp node: %v\n", err)
	}
	return code
}
