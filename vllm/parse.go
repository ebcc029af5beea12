package vllm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// envAssignment is a shell variable assignment word (`NAME=value`) before the program name.
var envAssignment = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`) })

// ParseServe parses one `vllm serve` command line as a shell and then vLLM's argument parser
// would (vllm/utils/argparse_utils.py FlexibleArgumentParser over cli_args.make_arg_parser):
// shell quoting and backslashes; leading NAME=value assignments (kept in Env); the model as the
// positional model_tag or --model; the options of vLLM's own parser (KnownFlags: the catalog
// generated from it, `make flags`) in their long form, their short aliases (`-n4` too), a unique
// prefix of one, with underscores for dashes (`--tensor_parallel_size`), as `--flag=value` or
// `--flag value`; `--no-<flag>` for boolean flags; `--<flag>.key value` for one key of a flag's
// JSON value. Each value is checked as argparse's type= and choices check it, a config
// dataclass's keys against its fields. What argparse refuses is an *ArgError with argparse's
// message (an unknown word, all of them at once, after every argument was read, as parse_args
// does); what the parser raises instead is a *PyError; -h/--help is a *HelpExit; a line the
// shell cannot split is a *ShellError. TestParseServeAgreesWithVLLMsParser has vLLM's parser
// judge it on some three thousand lines.
//
// The program is `vllm serve`, `python -m vllm.entrypoints.cli.main serve` (the same
// subcommand), `python -m vllm.entrypoints.openai.api_server` or `python -m
// vllm.entrypoints.grpc_server` (its own parser: grpcServerOptions) (ServeArgs.Entrypoint). For the
// serve subcommand FlexibleArgumentParser.parse_args first moves the first `--model X` to the
// positional slot, so a line that also names a positional model is refused, as vLLM refuses it.
//
// A line is read as the shell runs it, as launch scripts write it: redirections (`> log 2>&1`)
// are dropped, a trailing `&` is fine, the launch may be one command of a list or pipeline
// (`cd /w && vllm serve ... | tee log`) whose `export NAME=value` commands before it set its
// environment, and it may run under `env NAME=value`, `nohup`, `exec`, `time`, `uv run` or
// `sh -c "..."` (whose script is read the same way). A line must launch exactly one vLLM server.
//
// Not supported, and rejected with an error rather than guessed: --config (the model reads no
// files).
func ParseServe(cmdline string) (*ServeArgs, error) {
	cmds, err := splitCommands(cmdline)
	if err != nil {
		return nil, err
	}
	a := newServeArgs()
	words, env, err := launchCommand(cmds)
	if err != nil {
		return nil, err
	}
	if len(env) > 0 {
		a.Env = env
	}
	first, entry, err := entrypoint(words, 0)
	if err != nil {
		return nil, err
	}
	a.Argv = append([]string(nil), words...)
	a.Entrypoint = entry
	rest := words[first:]
	if entry == EntrypointServe {
		if rest, err = relocateModel(rest); err != nil {
			return nil, err
		}
	}
	if entry == EntrypointGRPCServer {
		a.Port = defaultGRPCServerPort
	}
	p := &argParser{args: a, words: rest}
	if err := p.run(); err != nil {
		if prog := entrypointProg(entry); prog != "" {
			// The entrypoint's one parser refuses both arguments and leftovers.
			var ae *ArgError
			var he *HelpExit
			if errors.As(err, &ae) {
				ae.Prog = prog
			} else if errors.As(err, &he) {
				he.Prog = prog
			}
		}
		return nil, err
	}
	return a, nil
}

// launchCommand picks the simple command that launches vLLM out of a line's commands and
// returns it from its program on, with the environment the shell gives it: `export NAME=value`
// of earlier commands, then its own leading assignments and `env NAME=value` ones.
func launchCommand(cmds [][]string) ([]string, map[string]string, error) {
	exported := map[string]string{}
	var (
		launch []string
		env    map[string]string
		first  string
	)
	for _, cmd := range cmds {
		cmdEnv := map[string]string{}
		words := cmd
		for {
			for len(words) > 0 && envAssignment().MatchString(words[0]) {
				k, v, _ := strings.Cut(words[0], "=")
				cmdEnv[k] = v
				words = words[1:]
			}
			if len(words) == 0 {
				break
			}
			// Wrappers that run the rest of the line as the command, with the same arguments.
			switch w := path.Base(words[0]); {
			case w == "nohup" || w == "exec" || w == "time" || w == "env":
				words = words[1:]
				continue
			case w == "uv" && len(words) > 1 && words[1] == "run":
				words = words[2:]
				continue
			}
			break
		}
		if len(words) == 0 {
			continue
		}
		if first == "" {
			first = words[0]
		}
		if words[0] == "export" {
			for _, w := range words[1:] {
				if envAssignment().MatchString(w) {
					k, v, _ := strings.Cut(w, "=")
					exported[k] = v
				}
			}
			continue
		}
		inner := map[string]string{}
		if script, ok := shellScript(words); ok {
			// `sh -c "vllm serve ..."` (a container's command): the script is a line of its own,
			// run with this command's environment.
			sub, err := splitCommands(script)
			if err != nil {
				return nil, nil, err
			}
			if words, inner, err = launchCommand(sub); err != nil || words == nil {
				return nil, nil, err
			}
		} else if !isLaunch(words) {
			continue
		}
		if launch != nil {
			return nil, nil, &ArgError{Reason: "the line launches more than one vLLM server; give each its own command"}
		}
		launch = words
		env = map[string]string{}
		for _, layer := range []map[string]string{exported, cmdEnv, inner} {
			for k, v := range layer {
				env[k] = v
			}
		}
	}
	if launch == nil {
		if first == "" {
			return nil, nil, &ArgError{Reason: "empty command: expected `vllm serve ...`"}
		}
		// Report the first program as the one that is not vLLM.
		for _, cmd := range cmds {
			w := cmd
			for len(w) > 0 && envAssignment().MatchString(w[0]) {
				w = w[1:]
			}
			if len(w) > 0 {
				_, _, err := entrypoint(w, 0)
				return nil, nil, err
			}
		}
	}
	return launch, env, nil
}

// shellScript returns the script of `sh -c SCRIPT` (bash, dash, zsh; -c alone or in a group such
// as -lc or -ec), the form container specs launch vLLM with.
func shellScript(words []string) (string, bool) {
	switch path.Base(words[0]) {
	case "sh", "bash", "dash", "zsh":
	default:
		return "", false
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
			return "", false
		}
		if !strings.HasPrefix(w, "--") && strings.Contains(w, "c") {
			if i+1 < len(words) {
				return words[i+1], true
			}
			return "", false
		}
	}
	return "", false
}

// isLaunch reports whether a command runs a vLLM server program (entrypoint accepts it, or it is
// `vllm` / `python -m vllm...`, whose errors entrypoint then names).
func isLaunch(words []string) bool {
	base := path.Base(words[0])
	if base == "vllm" {
		return true
	}
	return pythonProgram().MatchString(base) && len(words) > 2 && words[1] == "-m" && strings.HasPrefix(words[2], "vllm.")
}

// pythonProgram is the interpreter of a `python -m` launch: python, python3, python3.12, by any
// path.
var pythonProgram = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^python(\d+(\.\d+)*)?$`) })

// Modules a `python -m` line may run (vllm/entrypoints/cli/main.py and
// vllm/entrypoints/openai/api_server.py).
const (
	cliMainModule    = "vllm.entrypoints.cli.main"
	apiServerModule  = "vllm.entrypoints.openai.api_server"
	grpcServerModule = "vllm.entrypoints.grpc_server"
)

// entrypointProg is the program name of a python -m entrypoint's parser (argparse's prog: the
// module file's name), "" for the serve subcommand's.
func entrypointProg(entry string) string {
	switch entry {
	case EntrypointAPIServer:
		return progAPIServer
	case EntrypointGRPCServer:
		return progGRPCServer
	}
	return ""
}

// entrypoint recognises the program at words[i] and returns the index of its first argument.
func entrypoint(words []string, i int) (int, string, error) {
	prog := words[i]
	subcommand := func(at int) (int, string, error) {
		if at >= len(words) || words[at] != "serve" {
			sub := ""
			if at < len(words) {
				sub = words[at]
			}
			return 0, "", &ArgError{Value: sub, Reason: fmt.Sprintf("expected the serve subcommand after %s, got %q", strings.Join(words[i:at], " "), sub)}
		}
		return at + 1, EntrypointServe, nil
	}
	switch base := path.Base(prog); {
	case prog == "vllm" || base == "vllm":
		return subcommand(i + 1)
	case pythonProgram().MatchString(base):
		if i+2 >= len(words) || words[i+1] != "-m" {
			return 0, "", &ArgError{Value: prog, Reason: fmt.Sprintf("%s without `-m %s`, `-m %s` or `-m %s serve`: not a vLLM server launch", prog, apiServerModule, grpcServerModule, cliMainModule)}
		}
		switch mod := words[i+2]; mod {
		case apiServerModule:
			return i + 3, EntrypointAPIServer, nil
		case grpcServerModule:
			return i + 3, EntrypointGRPCServer, nil
		case cliMainModule:
			return subcommand(i + 3)
		default:
			return 0, "", &ArgError{Value: mod, Reason: fmt.Sprintf("python module %q is not a vLLM server (expected %s, %s, or %s serve)", mod, apiServerModule, grpcServerModule, cliMainModule)}
		}
	}
	return 0, "", &ArgError{Value: prog, Reason: fmt.Sprintf("not a vllm command: %q (expected `vllm serve ...`)", prog)}
}

// modelOption is FlexibleArgumentParser.parse_args' test for the --model option it relocates.
var modelOption = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^--model(=.+|$)`) })

// relocateModel is FlexibleArgumentParser.parse_args for `serve`: the first `--model X` (or
// `--model=X`) is removed and X becomes the first argument, the positional model_tag. A missing
// value is argparse's error for --model.
func relocateModel(words []string) ([]string, error) {
	for j, w := range words {
		if !modelOption().MatchString(w) {
			continue
		}
		var tag string
		next := j + 1
		if w == "--model" {
			if j+1 >= len(words) {
				// args[model_idx + 1] past the end: the parser raises before argparse runs.
				return nil, &PyError{Type: "IndexError", Msg: "list index out of range"}
			}
			tag, next = words[j+1], j+2
		} else {
			tag = strings.TrimPrefix(w, "--model=")
		}
		out := make([]string, 0, len(words))
		out = append(out, tag)
		out = append(out, words[:j]...)
		return append(out, words[next:]...), nil
	}
	return words, nil
}

// argParser walks the words after `vllm serve`.
type argParser struct {
	args     *ServeArgs
	words    []string
	pos      int
	modelTag *string
	// modelTagPos is the index of the model's word in words.
	modelTagPos int
	modelOpt    *string
	// whole is the last whole JSON object given for each JSON flag (argparse keeps the last
	// occurrence); dottedKeys merges every `--<flag>.key value` of each flag (see dotted).
	whole      map[string]map[string]any
	dottedKeys map[string]map[string]any
	// dottedOrder are the flags given in dotted form, in the order of their first key.
	dottedOrder []*flagSpec
	// extras are the words argparse could not place (unknown options, a second positional), in
	// order: parsing goes on past them, and they are refused together at the end.
	extras []string
}

func (p *argParser) run() error {
	words, err := flexibleDotted(p.words, flagIndexOf(p.args.Entrypoint))
	if err != nil {
		return err
	}
	p.words = words
	onlyPositionals := false
	for p.pos < len(p.words) {
		w := p.words[p.pos]
		p.pos++
		if !onlyPositionals && w == "--" {
			// argparse drops the first "--" only where it consumes a positional: before the
			// model, or right after it (the model's nargs="?" takes it); later it is left
			// over like the words after it.
			onlyPositionals = true
			if p.args.Entrypoint == EntrypointGRPCServer || p.modelTag != nil && p.modelTagPos != p.pos-2 {
				// (grpc_server's parser has no positional to consume it.)
				p.extras = append(p.extras, w)
			}
			continue
		}
		if onlyPositionals || !looksLikeOption(w) {
			if err := p.positional(w); err != nil {
				return err
			}
			continue
		}
		if err := p.option(w); err != nil {
			return err
		}
	}
	// FlexibleArgumentParser hands argparse each dotted flag's keys as one JSON value after every
	// other word: a flag of another type reads that text as its value.
	for _, spec := range p.dottedOrder {
		if spec.kind == kindJSON {
			continue
		}
		text := pyJSONDumps(p.dottedKeys[spec.long()])
		delete(p.dottedKeys, spec.long())
		switch {
		case spec.kind == kindHelp:
			return &HelpExit{}
		case !spec.takesValue():
			if err := p.setBool(spec, false); err != nil {
				return err
			}
			p.extras = append(p.extras, text)
		case spec.kind == kindList || spec.kind == kindOptional:
			if err := checkValue(spec, text); err != nil {
				return err
			}
		default:
			if err := p.set(spec, text); err != nil { // set checks the value
				return err
			}
		}
	}
	switch {
	case p.modelTag != nil:
		p.args.Model = *p.modelTag
	case p.modelOpt != nil:
		p.args.Model = *p.modelOpt
	}
	// FlexibleArgumentParser appends the merged dotted keys of a flag as one more whole JSON after
	// every other argument, so they replace a whole value of that flag rather than amend it.
	for flag, obj := range p.whole {
		p.args.setJSONConfig(flag, obj)
	}
	dottedFlags := make([]string, 0, len(p.dottedKeys))
	for flag := range p.dottedKeys {
		dottedFlags = append(dottedFlags, flag)
	}
	sort.Strings(dottedFlags)
	for _, flag := range dottedFlags {
		obj := p.dottedKeys[flag]
		if ref, ok := flagIndexOf(p.args.Entrypoint).index[flag]; ok {
			if err := checkConfig(ref.spec, pyJSONDumps(obj), obj); err != nil {
				return err
			}
			if validate, ok := validatedConfigs[flag]; ok {
				if err := validate(obj); err != nil {
					return err
				}
			}
		}
		p.args.setJSONConfig(flag, obj)
	}
	if kvMap := p.args.jsonConfig("--kv-transfer-config"); kvMap != nil {
		kv, err := kvTransferFromMap(kvMap)
		if err != nil {
			return err
		}
		p.args.KVTransfer = kv
	}
	if evMap := p.args.jsonConfig("--kv-events-config"); evMap != nil {
		p.args.KVEvents = kvEventsFromMap(evMap)
	}
	// parse_args refuses what parse_known_args left over, once every argument was read (the
	// top-level parser's error: prog "vllm", not the serve subparser's).
	if len(p.extras) > 0 {
		return &ArgError{Prog: progTop, Reason: "unrecognized arguments: " + strings.Join(p.extras, " ")}
	}
	return nil
}

// validatedConfigs are the JSON flags whose dataclass the model reads, with their validation
// (argparse's type= runs pydantic on each occurrence).
var validatedConfigs = map[string]func(map[string]any) error{
	"--kv-transfer-config": func(m map[string]any) error { _, err := kvTransferFromMap(m); return err },
	// KVEventsConfig's __post_init__ only fills in the publisher: its schema is all its checks.
	"--kv-events-config": func(map[string]any) error { return nil },
	// ECTransferConfig.__post_init__ (vllm/config/ec_transfer.py): a connector needs a role (a
	// role outside ECRole is the schema's Literal error first).
	"--ec-transfer-config": func(m map[string]any) error {
		if m["ec_connector"] != nil && m["ec_role"] == nil {
			return validationArgError("--ec-transfer-config", "ec_role", "ECTransferConfig", []string{"Value error, Please specify ec_role when ec_connector is set, supported roles are ('ec_producer', 'ec_both', 'ec_consumer')"})
		}
		return nil
	},
}

// expandHumanNumbers is arg_utils._expand_json_human_readable_numbers: outside JSON strings, a
// bare number with a k/m/g/t (decimal) or K/M/G/T (binary) suffix becomes human_readable_int's
// integer. A token that function refuses (a fraction with a binary suffix) is left as it is, and
// the JSON decoder refuses it.
func expandHumanNumbers(val string) string {
	var b strings.Builder
	last := 0
	for _, loc := range jsonStrings().FindAllStringIndex(val, -1) {
		b.WriteString(expandHumanTokens(val[last:loc[0]]))
		b.WriteString(val[loc[0]:loc[1]])
		last = loc[1]
	}
	b.WriteString(expandHumanTokens(val[last:]))
	return b.String()
}

func expandHumanTokens(s string) string {
	return humanToken().ReplaceAllStringFunc(s, func(t string) string {
		if n, ok := humanReadableInt(t); ok {
			return n.String()
		}
		return t
	})
}

var (
	jsonStrings = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"(?:[^"\\]|\\.)*"`) })
	humanToken  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b\d+(?:\.\d+)?[kKmMgGtT]\b`) })
)

// flexibleDotted is FlexibleArgumentParser.parse_args' (vllm/utils/argparse_utils.py) reading of
// dotted config keys before argparse sees any word: a word that starts with '-' and has a '.' in
// its name (before any '='; -O words are optimization levels) is a key, and the next word is its
// value whatever it is — so a negative fraction given as a value is a key too ("--watermark
// -0.5"), and a key last on the line has no value: IndexError. The keys and their values leave
// their places for the end of the line, where argparse reads them: a key of an option the parser
// knows goes on as written (argParser.option merges its keys); the keys of any other name go as
// that name and one JSON object of them, which argparse then reads as what they look like ("-0
// {"5": "--seed"}").
func flexibleDotted(words []string, table flagTable) ([]string, error) {
	var kept, known []string
	var unknown []string
	merged := map[string]map[string]any{}
	for i := 0; i < len(words); i++ {
		w := words[i]
		name, _, hasEq := strings.Cut(w, "=")
		if !strings.HasPrefix(w, "-") || strings.HasPrefix(w, "-O") && w != "-O" || !strings.Contains(name, ".") {
			kept = append(kept, w)
			continue
		}
		word := []string{w}
		val := ""
		if hasEq {
			_, val, _ = strings.Cut(w, "=")
		} else {
			if i+1 >= len(words) {
				return nil, &PyError{Type: "IndexError", Msg: "list index out of range"}
			}
			i++
			val = words[i]
			word = append(word, val)
		}
		base, key, _ := strings.Cut(name, ".")
		lookup := base
		if strings.HasPrefix(base, "--") {
			lookup = strings.ReplaceAll(base, "_", "-")
		}
		if _, ok := table.index[lookup]; ok || strings.HasPrefix(base, "--") && uniquePrefix(table, lookup) {
			known = append(known, word...)
			continue
		}
		key, v := dottedValue(key, val)
		parts := strings.Split(key, ".")
		for k := len(parts) - 1; k >= 0; k-- {
			v = map[string]any{parts[k]: v}
		}
		if merged[base] == nil {
			merged[base] = map[string]any{}
			unknown = append(unknown, base)
		}
		mergeDict(merged[base], v.(map[string]any))
	}
	out := append(kept, known...)
	for _, base := range unknown {
		out = append(out, base, pyJSONDumps(merged[base]))
	}
	return out, nil
}

// dottedValue is FlexibleArgumentParser's value for a dotted key: a key ending in "+" takes a
// comma-separated list (and loses its "+"); any other what json.loads reads, else
// human_readable_int's integer, else the text itself.
func dottedValue(key, val string) (string, any) {
	if k, ok := strings.CutSuffix(key, "+"); ok {
		items := strings.Split(val, ",")
		list := make([]any, len(items))
		for i, it := range items {
			list[i] = it
		}
		return k, list
	}
	if v, err := decodeJSON(val); err == nil {
		return key, v
	}
	if n, ok := humanReadableInt(val); ok {
		return key, n
	}
	return key, val
}

// uniquePrefix reports whether exactly one long option starts with prefix (argparse's
// allow_abbrev).
func uniquePrefix(table flagTable, prefix string) bool {
	n := 0
	for _, name := range table.order {
		if strings.HasPrefix(name, "--") && strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n == 1
}

// negativeNumber is argparse's _negative_number_matcher: since no option looks like a negative
// number, such a word is a value ("--seed -1").
var negativeNumber = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-\d+$|^-\d*\.\d+$`) })

// looksLikeOption is argparse's test for an option string: a leading '-', not "-" alone and not
// a negative number.
func looksLikeOption(w string) bool {
	return len(w) >= 2 && w[0] == '-' && !negativeNumber().MatchString(w)
}

func (p *argParser) positional(w string) error {
	if p.modelTag != nil || p.args.Entrypoint == EntrypointGRPCServer {
		// grpc_server's parser has no positional argument.
		p.extras = append(p.extras, w)
		return nil
	}
	p.modelTag = &w
	p.modelTagPos = p.pos - 1
	return nil
}

// option handles one option word (and the values it consumes).
func (p *argParser) option(w string) error {
	if strings.HasPrefix(w, "-O") {
		return p.optimizationLevel(w)
	}
	name, explicit, hasExplicit := strings.Cut(w, "=")
	base, key, dotted := strings.Cut(name, ".")
	if strings.HasPrefix(base, "--") {
		// FlexibleArgumentParser accepts underscores in long options: --tensor_parallel_size.
		base = strings.ReplaceAll(base, "_", "-")
	}
	table := flagIndexOf(p.args.Entrypoint)
	ref, ok := table.index[base]
	if !ok {
		// argparse's allow_abbrev (FlexibleArgumentParser keeps the default): a unique prefix of
		// an option stands for it, and a short option may carry its value (`-n4`); argparse
		// lists the matches in its registration order (Python 3.11 _get_option_tuples).
		type match struct {
			name, explicit string
			hasExplicit    bool
		}
		var matches []match
		long := strings.HasPrefix(base, "--")
		for _, n := range table.order {
			switch {
			case long && strings.HasPrefix(n, base):
				matches = append(matches, match{name: n})
			case !long && len(base) > 2 && n == base[:2]:
				matches = append(matches, match{name: n, explicit: base[2:] + eqSuffix(explicit, hasExplicit), hasExplicit: true})
			case !long && strings.HasPrefix(n, base):
				matches = append(matches, match{name: n})
			}
		}
		switch len(matches) {
		case 0:
		case 1:
			ref, ok = table.index[matches[0].name], true
			base = matches[0].name
			if matches[0].hasExplicit {
				explicit, hasExplicit = matches[0].explicit, true
			}
		default:
			names := make([]string, len(matches))
			for i, m := range matches {
				names[i] = m.name
			}
			return &ArgError{Value: w, Reason: fmt.Sprintf("ambiguous option: %s could match %s", base+eqSuffix(explicit, hasExplicit), strings.Join(names, ", "))}
		}
	}
	if !ok {
		// argparse sets an unknown option aside and goes on; its words are read as what they
		// look like (a value after it is a positional).
		p.extras = append(p.extras, w)
		return nil
	}
	spec := ref.spec
	if dotted {
		if ref.negated {
			p.extras = append(p.extras, w)
			return nil
		}
		// FlexibleArgumentParser takes the next word as a dotted key's value whatever it looks
		// like (processed_args[i + 1]).
		val := explicit
		if !hasExplicit {
			if p.pos >= len(p.words) {
				return &ArgError{Flag: spec.display(), Value: key, Reason: "expected one argument"}
			}
			val = p.words[p.pos]
			p.pos++
		}
		return p.dotted(spec, key, val)
	}
	switch spec.kind {
	case kindHelp:
		return &HelpExit{}
	case kindBool, kindStoreTrue:
		if hasExplicit {
			return &ArgError{Flag: spec.display(), Value: explicit, Reason: "ignored explicit argument " + pyRepr(explicit)}
		}
		return p.setBool(spec, ref.negated)
	case kindList:
		vals, err := p.list(spec, explicit, hasExplicit)
		if err != nil {
			return err
		}
		for _, v := range vals {
			if err := checkValue(spec, v); err != nil {
				return err
			}
			if spec.opt.Action == "lora_modules" && !(spec.opt.Nullable && (v == "" || v == "None")) {
				if err := checkLoRAModule(v); err != nil {
					return err
				}
			}
		}
		// argparse's store (and vLLM's LoRAParserAction) replaces the list an earlier occurrence
		// gave: only the last one's values are kept.
		kept := p.args.Other[:0]
		for _, o := range p.args.Other {
			if o.Flag != spec.long() {
				kept = append(kept, o)
			}
		}
		p.args.Other = kept
		for _, v := range vals {
			p.other(spec.long(), &v)
		}
		return nil
	case kindOptional:
		if hasExplicit {
			p.other(spec.long(), &explicit)
			return nil
		}
		if p.pos < len(p.words) && !looksLikeOption(p.words[p.pos]) && p.words[p.pos] != "--" {
			v := p.words[p.pos]
			p.pos++
			p.other(spec.long(), &v)
			return nil
		}
		p.other(spec.long(), nil)
		return nil
	}
	val, err := p.value(spec, explicit, hasExplicit)
	if err != nil {
		return err
	}
	return p.set(spec, val)
}

// eqSuffix is "=value" when a word carried one.
func eqSuffix(explicit string, has bool) string {
	if !has {
		return ""
	}
	return "=" + explicit
}

// optimizationLevel is FlexibleArgumentParser's -O shorthand, rewritten before argparse sees it:
// `-O<x>` and `-O=<x>` are `--optimization-level <x>` whatever x is (so `-O.mode` is the level
// ".mode", not a dotted key), and a bare `-O` is `--optimization-level` only when a level 0-3
// follows; otherwise argparse knows no `-O` option.
func (p *argParser) optimizationLevel(w string) error {
	spec := flagIndexOf(p.args.Entrypoint).index["--optimization-level"].spec
	if w != "-O" {
		level := w[2:]
		if level[0] == '=' {
			level = level[1:]
		}
		return p.set(spec, level)
	}
	if p.pos < len(p.words) {
		switch next := p.words[p.pos]; next {
		case "0", "1", "2", "3":
			p.pos++
			return p.set(spec, next)
		}
	}
	return &ArgError{Value: w, Reason: "unrecognized arguments: " + w}
}

// value returns the single value of a flag: the explicit `=value` or the next word.
func (p *argParser) value(spec *flagSpec, explicit string, hasExplicit bool) (string, error) {
	if hasExplicit {
		return explicit, nil
	}
	if p.pos >= len(p.words) || looksLikeOption(p.words[p.pos]) || p.words[p.pos] == "--" {
		return "", &ArgError{Flag: spec.display(), Reason: "expected one argument"}
	}
	v := p.words[p.pos]
	p.pos++
	return v, nil
}

// list returns the values of an nargs="+" flag: one or more words up to the next option.
func (p *argParser) list(spec *flagSpec, explicit string, hasExplicit bool) ([]string, error) {
	if hasExplicit {
		return []string{explicit}, nil
	}
	var vals []string
	for p.pos < len(p.words) && !looksLikeOption(p.words[p.pos]) && p.words[p.pos] != "--" {
		vals = append(vals, p.words[p.pos])
		p.pos++
	}
	if len(vals) == 0 {
		return nil, &ArgError{Flag: spec.display(), Reason: "expected at least one argument"}
	}
	return vals, nil
}

func (p *argParser) other(flag string, v *string) {
	var cp *string
	if v != nil {
		s := *v
		cp = &s
	}
	p.args.Other = append(p.args.Other, Option{Flag: flag, Value: cp})
}

func (p *argParser) setBool(spec *flagSpec, negated bool) error {
	v := !negated
	a := p.args
	switch spec.long() {
	case "--headless":
		a.Headless = v
	case "--data-parallel-external-lb":
		a.DataParallelExternalLB = v
	case "--data-parallel-hybrid-lb":
		a.DataParallelHybridLB = v
	case "--data-parallel-multi-port-external-lb":
		a.DataParallelMultiPortExternalLB = v
	case "--enable-expert-parallel":
		a.EnableExpertParallel = v
	default:
		flag := spec.long()
		if negated {
			flag = "--no-" + strings.TrimPrefix(flag, "--")
		}
		p.other(flag, nil)
	}
	return nil
}

// set stores one flag value, checked as argparse's type= and choices check it (checkValue) and,
// for the configs the model reads, as pydantic does.
func (p *argParser) set(spec *flagSpec, val string) error {
	a := p.args
	flag := spec.long()
	if err := checkValue(spec, val); err != nil {
		return err
	}
	// optional_type reads "" and "None" as None: the option is given, its value is the default.
	null := spec.opt.Nullable && (val == "" || val == "None")
	switch spec.kind {
	case kindInt:
		// argparse's type=int takes any int; the bounds of the sizes the model reads are
		// ParallelConfig's field constraints, checked when create_engine_config builds it
		// (parallel.go fieldErrors).
		if n, _ := pyInt(val); p.setSize(flag, n) {
			return nil
		}
	case kindJSON:
		if validate, ok := validatedConfigs[flag]; ok {
			if null {
				// The config is None (a later occurrence or the dotted keys may still give one).
				p.setWhole(flag, nil)
				return nil
			}
			obj, err := jsonObject(expandHumanNumbers(val))
			if err != nil {
				return &ArgError{Flag: spec.display(), Value: val, Reason: err.Error()}
			}
			// argparse runs the type (pydantic's validation) on every occurrence, even one a
			// later occurrence replaces: the fields' types first, then what the class checks.
			if err := checkConfig(spec, val, obj); err != nil {
				return err
			}
			if err := validate(obj); err != nil {
				return err
			}
			p.setWhole(flag, obj)
			return nil
		}
		if !null {
			if spec.opt.Type == "dataclass" {
				// parse_dataclass: human-readable numbers expanded, then pydantic reads the JSON
				// as the config dataclass: an object of the class's fields, of their types
				// (checkConfig).
				obj, err := jsonObject(expandHumanNumbers(val))
				if err != nil {
					return validationArgError(spec.display(), val, spec.opt.Class, []string{err.Error()})
				}
				if err := checkConfig(spec, val, obj); err != nil {
					return err
				}
				p.setWhole(flag, obj)
			} else if v, err := decodeJSON(val); err == nil {
				if obj, ok := v.(map[string]any); ok {
					p.setWhole(flag, obj)
				}
			}
		}
	case kindString:
		switch flag {
		case "--model":
			v := val
			p.modelOpt = &v
			return nil
		case "--config":
			return &ArgError{Flag: spec.display(), Value: val, Reason: fmt.Sprintf("config file %q is not read by the model; inline its options on the command line", val)}
		case "--master-addr":
			a.MasterAddr = val
			return nil
		case "--data-parallel-address":
			v := val
			a.DataParallelAddress = &v
			return nil
		case "--data-parallel-backend":
			a.DataParallelBackend = val
			return nil
		case "--distributed-executor-backend":
			if null {
				a.DistributedExecutorBackend = nil
				return nil
			}
			v := val
			a.DistributedExecutorBackend = &v
			return nil
		}
	}
	v := val
	p.other(flag, &v)
	return nil
}

// setSize stores an int option the model reads in its ServeArgs field, and reports whether the
// model reads it (the others are kept verbatim in Other).
func (p *argParser) setSize(flag string, n int) bool {
	a := p.args
	ptr := func() *int { v := n; return &v }
	switch flag {
	case "--tensor-parallel-size":
		a.TensorParallelSize = n
	case "--pipeline-parallel-size":
		a.PipelineParallelSize = n
	case "--prefill-context-parallel-size":
		a.PrefillContextParallelSize = n
	case "--decode-context-parallel-size":
		a.DecodeContextParallelSize = n
	case "--data-parallel-size":
		a.DataParallelSize = n
	case "--data-parallel-rank":
		a.DataParallelRank = ptr()
	case "--data-parallel-start-rank":
		a.DataParallelStartRank = ptr()
	case "--data-parallel-size-local":
		a.DataParallelSizeLocal = ptr()
	case "--data-parallel-rpc-port":
		a.DataParallelRPCPort = ptr()
	case "--nnodes":
		a.NNodes = n
	case "--node-rank":
		a.NodeRank = n
	case "--master-port":
		a.MasterPort = n
	case "--api-server-count":
		a.APIServerCount = ptr()
	case "--port":
		a.Port = n
	case "--data-parallel-supervisor-port":
		a.DataParallelSupervisorPort = n
	default:
		return false
	}
	return true
}

// dotted sets one key of a JSON flag (`--kv-transfer-config.kv_role kv_both`) as
// FlexibleArgumentParser.parse_args does: the value is decoded as JSON, else as a
// human_readable_int ("1k"), else kept as a string; a key ending in "+" takes a comma-separated
// list that extends a list already given; all keys of one flag merge into one object
// (recursive_dict_update: nested objects merge, lists extend, anything else is replaced).
func (p *argParser) dotted(spec *flagSpec, key, val string) error {
	key, decoded := dottedValue(key, val)
	if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
		return &ArgError{Flag: spec.display(), Value: key, Reason: fmt.Sprintf("invalid key %q", key)}
	}
	if _, read := validatedConfigs[spec.long()]; !read && spec.kind == kindJSON {
		v := key + "=" + val
		p.other(spec.long()+".", &v)
	}
	parts := strings.Split(key, ".")
	nested := decoded
	for i := len(parts) - 1; i >= 0; i-- {
		nested = map[string]any{parts[i]: nested}
	}
	if p.dottedKeys == nil {
		p.dottedKeys = map[string]map[string]any{}
	}
	if p.dottedKeys[spec.long()] == nil {
		p.dottedKeys[spec.long()] = map[string]any{}
		p.dottedOrder = append(p.dottedOrder, spec)
	}
	mergeDict(p.dottedKeys[spec.long()], nested.(map[string]any))
	return nil
}

func (p *argParser) setWhole(flag string, obj map[string]any) {
	if p.whole == nil {
		p.whole = map[string]map[string]any{}
	}
	p.whole[flag] = obj
}

// mergeDict is FlexibleArgumentParser's recursive_dict_update.
func mergeDict(orig, update map[string]any) {
	for k, v := range update {
		switch nv := v.(type) {
		case map[string]any:
			if om, ok := orig[k].(map[string]any); ok {
				mergeDict(om, nv)
				continue
			}
		case []any:
			if ol, ok := orig[k].([]any); ok {
				orig[k] = append(ol, nv...)
				continue
			}
		}
		orig[k] = v
	}
}

// humanReadableInt is vllm/utils/argparse_utils.py human_readable_int as the dotted-key parser
// uses it: a number with a decimal (k, m, g, t) or binary (K, M, G, T, integers only) suffix,
// else Python's int(). The value is returned as a JSON number.
func humanReadableInt(s string) (json.Number, bool) {
	t := strings.TrimSpace(s)
	if m := humanSuffix().FindStringSubmatch(t); m != nil {
		number, suffix := m[1], m[2]
		if mult, ok := decimalMultiplier[suffix]; ok {
			f, err := strconv.ParseFloat(number, 64)
			if err != nil {
				return "", false
			}
			return json.Number(strconv.FormatInt(int64(f*float64(mult)), 10)), true
		}
		n, err := strconv.ParseInt(number, 10, 64)
		if err != nil {
			return "", false // "Decimals are not allowed with binary suffixes"
		}
		return json.Number(strconv.FormatInt(n<<binaryShift[suffix], 10)), true
	}
	n, err := pyInt(t)
	if err != nil {
		return "", false
	}
	return json.Number(strconv.Itoa(n)), true
}

// humanSuffix, decimalMultiplier and binaryShift are human_readable_int's tables.
var (
	humanSuffix       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d+(?:\.\d+)?)([kKmMgGtT])$`) })
	decimalMultiplier = map[string]int64{"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
	binaryShift       = map[string]uint{"K": 10, "M": 20, "G": 30, "T": 40}
)

// pyInt parses what Python's int() accepts: surrounding whitespace, a sign, and digits with
// single underscores between them ("1_000").
func pyInt(s string) (int, error) {
	t := strings.TrimSpace(s)
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) > 1 || body == "" || body[0] == '_' || body[len(body)-1] == '_' || strings.Contains(body, "__") {
		return 0, fmt.Errorf("invalid literal for int() with base 10: %q", s)
	}
	for _, c := range body {
		if (c < '0' || c > '9') && c != '_' {
			return 0, fmt.Errorf("invalid literal for int() with base 10: %q", s)
		}
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64)
	if err != nil || n > math.MaxInt32 || n < math.MinInt32 {
		// Values past int32 are no parallel size, rank or port; refusing them keeps every
		// product the model computes (world sizes, rank offsets) far from overflow.
		return 0, fmt.Errorf("invalid literal for int() with base 10: %q", s)
	}
	return int(n), nil
}

// pyFloat is Python's float() of a string: surrounding whitespace ignored, a decimal number
// (underscores between digits only, an exponent, a number too large is infinite), or inf,
// infinity or nan in any case, signed. Hexadecimal and other Go spellings are refused.
func pyFloat(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if pyFloatWord().MatchString(t) {
		word := strings.ToLower(strings.TrimLeft(t, "+-"))
		switch {
		case word == "nan":
			return math.NaN(), nil
		case strings.HasPrefix(t, "-"):
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	}
	if !pyFloatText().MatchString(t) {
		return 0, fmt.Errorf("could not convert string to float: %s", pyRepr(s))
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, err
	}
	return f, nil
}

// Compiled at first use: every simulated process imports this package and needs neither.
var (
	pyFloatText = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[+-]?(([0-9]+(_[0-9]+)*)?\.[0-9]+(_[0-9]+)*|[0-9]+(_[0-9]+)*\.?)([eE][+-]?[0-9]+(_[0-9]+)*)?$`)
	})
	pyFloatWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[+-]?(?i:inf|infinity|nan)$`) })
)

// decodeJSON decodes one JSON value with numbers kept as written (json.Number), rejecting
// trailing data as Python's json.loads does.
func decodeJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("extra data after the JSON value")
	}
	var rest bytes.Buffer
	if _, err := rest.ReadFrom(dec.Buffered()); err == nil && strings.TrimSpace(rest.String()) != "" {
		return nil, fmt.Errorf("extra data after the JSON value")
	}
	return v, nil
}

func jsonObject(s string) (map[string]any, error) {
	v, err := decodeJSON(s)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("invalid JSON: expected an object, got %s", jsonKind(v))
	}
	return obj, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

// kvTransferFromMap reads a KVTransferConfig whose fields pydantic validated against the
// class's schema (checkConfig: inside argparse's type=, or newKVTransferConfig), and runs its
// __post_init__: a connector needs a kv_role. The error is argparse's; outside argparse
// newKVTransferConfig raises it as the ValidationError.
func kvTransferFromMap(m map[string]any) (*KVTransferConfig, error) {
	kv := &KVTransferConfig{Raw: m}
	kv.Connector, _ = m["kv_connector"].(string)
	if id, ok := m["engine_id"].(string); ok {
		kv.EngineID = &id
	}
	kv.Role, _ = m["kv_role"].(string)
	kv.ExtraConfig, _ = m["kv_connector_extra_config"].(map[string]any)
	if m["kv_connector"] != nil && m["kv_role"] == nil {
		// __post_init__'s ValueError: a model-level error, no field in its location; the roles
		// are get_args(KVRole) of vllm/config/kv_transfer.py.
		return nil, validationArgError("--kv-transfer-config", "kv_role", "KVTransferConfig", []string{"Value error, Please specify kv_role when kv_connector is set, supported roles are ('kv_producer', 'kv_both', 'kv_consumer')"})
	}
	return kv, nil
}
