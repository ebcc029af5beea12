package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit codes (README, "widetp explain" and "widetp run").
const (
	exitMatch    = 0 // the observed or predicted violations equal the scenario's expect
	exitDiffer   = 1 // they differ
	exitBadInput = 2 // bad file, unknown flag, unknown profile
	exitInfra    = 3 // infrastructure failure: no Docker, image build failed
)

// command is one subcommand. Each has its own flag set, so `widetp explain --help` documents only
// what explain takes.
type command struct {
	name    string
	summary string
	// usage is the synopsis after "widetp ".
	usage string
	// run receives the arguments after the subcommand name.
	run func(args []string, stdout, stderr io.Writer) int
	// hidden commands are the programs a run starts on its hosts (node, store, ipcls, idle): the help
	// lists them apart, since nobody starts them by hand.
	hidden bool
}

// commands are the subcommands by name; each file registers its own in init so that adding one
// touches no other.
var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// run is the whole tool with its streams passed in, so that tests call it without touching
// os.Args or the process's stdout.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitBadInput
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			if c, ok := commands[args[1]]; ok {
				return c.run([]string{"--help"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "widetp: unknown command %q\n\n", args[1])
			usage(stderr)
			return exitBadInput
		}
		usage(stdout)
		return exitMatch
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "widetp: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitBadInput
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "widetp reproduces multi-node vLLM deployments (wide tensor parallel, data-parallel replicas,")
	fmt.Fprintln(w, "the Mooncake store KV connector) and checks that their processes agree on who they are.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage:")
	fmt.Fprintln(w, "  widetp <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !commands[n].hidden {
			fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Programs of a run, which the runtime starts from this binary on every host (not by hand):")
	for _, n := range names {
		if commands[n].hidden {
			fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exit codes: 0 the violations equal the scenario's expect, 1 they differ, 2 bad input,")
	fmt.Fprintln(w, "3 infrastructure failure.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "widetp <command> --help" for a command's arguments.`)
}

// parseArgs parses a subcommand's arguments with flags and positionals in any order (`explain
// FILE --json` and `explain --json FILE` alike: the flag package alone stops at the first
// positional). Arguments after "--" are positionals. It reports help (done, exitMatch) and bad
// flags (done, exitBadInput) itself, printing to the right stream.
func parseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (positionals []string, done bool, code int) {
	fs.SetOutput(io.Discard)
	var rest []string
	for i, a := range args {
		if a == "--" {
			rest = args[i+1:]
			args = args[:i]
			break
		}
	}
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, true, exitMatch
		}
		if err != nil {
			fmt.Fprintf(stderr, "widetp %s: %v\n", fs.Name(), err)
			fs.SetOutput(stderr)
			fs.Usage()
			return nil, true, exitBadInput
		}
		if fs.NArg() == 0 {
			break
		}
		positionals = append(positionals, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return append(positionals, rest...), false, 0
}

// newFlagSet returns a flag set whose usage prints the command's synopsis, description and flags.
func newFlagSet(c *command, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: widetp %s\n\n%s\n", c.usage, strings.TrimSpace(description))
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}
