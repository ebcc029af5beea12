package vllm

import (
	"slices"
	"strings"

	"github.com/widetp/widetp/report"
)

// LaunchLine is a `vllm serve` line as the shell hands it to vLLM: the program's arguments after
// its entry point, the environment the line gives it, and which entry point runs. Reading a line
// this way is the shell's work (ParseServe's first half), not vLLM's, so every planner shares it;
// a planner that runs vLLM's own parser gives it Args.
type LaunchLine struct {
	// Entrypoint is EntrypointServe, EntrypointAPIServer or EntrypointGRPCServer.
	Entrypoint string `json:"entrypoint"`
	// Args are the words after `vllm serve` (or `python -m <module>`), unparsed.
	Args []string `json:"args"`
	// Env are the line's own NAME=value assignments (export, env, leading assignments).
	Env map[string]string `json:"env,omitempty"`
}

// SplitLaunch reads a line as the shell runs it (see ParseServe) and returns what it launches.
// An error is a line no shell would hand to vLLM as a server launch.
func SplitLaunch(line string) (LaunchLine, error) {
	cmds, err := splitCommands(line)
	if err != nil {
		return LaunchLine{}, err
	}
	words, env, err := launchCommand(cmds)
	if err != nil {
		return LaunchLine{}, err
	}
	first, entry, err := entrypoint(words, 0)
	if err != nil {
		return LaunchLine{}, err
	}
	return LaunchLine{Entrypoint: entry, Args: append([]string{}, words[first:]...), Env: env}, nil
}

// PlanUnlaunchable is the plan of a command whose line SplitLaunch refuses: its top process exits
// at StageConfig with the error, as PlanNode plans it. Planners that run vLLM's parser use it for
// lines that never reach vLLM.
func PlanUnlaunchable(n Node, cmd int, line string, err error) *ProcessPlan {
	role := topRoleBeforePath(line)
	cp := &cmdPlanner{node: n, cmd: cmd}
	return cp.crashed(cp.id(role, 0), "", role, nil, StageConfig, err)
}

// topRoleBeforePath is the role of a command's top process that fails before
// ServeSubcommand.cmd takes a launch path (the parser, the environment the parser reads,
// validate_parsed_serve_args, the load-balancing and Rust front end checks): the process is the
// one `vllm serve` started, named by what it was asked to be. A `vllm serve` line with the word
// --headless asks for the headless launcher, whatever else it says (--grpc only takes effect in
// cmd, after those checks); any other line, or another entry point, is an API server. A line the
// shell would not hand to vLLM is read word for word: --headless anywhere in it.
func topRoleBeforePath(line string) report.Role {
	l, err := SplitLaunch(line)
	if err != nil {
		if strings.Contains(line, "--headless") {
			return report.RoleHeadless
		}
		return report.RoleAPIServer
	}
	if l.Entrypoint == EntrypointServe && slices.Contains(l.Args, "--headless") {
		return report.RoleHeadless
	}
	return report.RoleAPIServer
}
