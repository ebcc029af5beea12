package vllm

import (
	"strings"
	"sync"
)

// ServeOption is one option of vLLM's `vllm serve` parser, as widetp's probe reads it off the
// parser vLLM builds (vllm/entrypoints/cli/serve.py over cli_args.make_arg_parser and
// arg_utils.EngineArgs.add_cli_args; the probe's flags op, python/widetp_probe/flags.py). The
// model's catalog (flags_vllm.go) is a list of these, generated from a vLLM checkout by
// `make flags VLLM=PATH`, so the model accepts exactly the options that vLLM does.
type ServeOption struct {
	// Names are the option's spellings in the parser's order, long name first; a
	// BooleanOptionalAction's `--no-` spelling is implied, not listed.
	Names []string `json:"names"`
	// Action is how argparse treats the option: "bool" (BooleanOptionalAction), "store_true",
	// "store", "append", "help", or "lora_modules" (cli_args.LoRAParserAction).
	Action string `json:"action"`
	// Type is what a store or append option's type= accepts: "int", "float", "human_int"
	// (arg_utils.human_readable_int), "human_int_or_auto", "string",
	// "string_lower_underscore" (a backend name, lowered with '-' read as '_'), "json"
	// (json.loads), "dataclass" (a config dataclass read from JSON by pydantic) or
	// "json_or_string" (arg_utils.union_dict_and_str).
	Type string `json:"type,omitempty"`
	// Nargs is "" for one value, "+" for one or more, "?" for an optional one.
	Nargs string `json:"nargs,omitempty"`
	// Nullable: the type is wrapped in arg_utils.optional_type, which reads "" and "None" as None.
	Nullable bool `json:"nullable,omitempty"`
	// Wrapped: the type is wrapped in arg_utils.optional_type or parse_type, whose error for a
	// value the type refuses is "Value X cannot be converted to T." rather than argparse's own.
	Wrapped bool `json:"wrapped,omitempty"`
	// Choices are the values argparse accepts, as Python's repr() prints them: argparse compares
	// the converted value with them (None, an int or a str) and lists them so in its error.
	Choices []string `json:"choices,omitempty"`
	// Class is a dataclass option's config class; Fields, when pydantic refuses keys the class
	// lacks, are the top-level keys it accepts.
	Class  string   `json:"class,omitempty"`
	Fields []string `json:"fields,omitempty"`
	// Schema is the class's fields' types and bounds as pydantic validates its JSON (a
	// configSchema, as JSON text; the probe's flags.py _compact writes it from pydantic's core
	// schema of the class).
	Schema string `json:"schema,omitempty"`
}

// flagKind is how the parser consumes and checks an option's value, derived from its
// ServeOption.
type flagKind int

const (
	// kindBool is argparse.BooleanOptionalAction: `--x` sets true, `--no-x` false, no value.
	kindBool flagKind = iota
	// kindStoreTrue is action="store_true": `--x` only, no `--no-x`.
	kindStoreTrue
	// kindHelp is -h/--help: argparse prints the help and exits 0.
	kindHelp
	// kindInt takes one value that Python's int() accepts.
	kindInt
	// kindHumanInt takes an int with an optional k/m/g/t multiplier (arg_utils.human_readable_int).
	kindHumanInt
	// kindFloat takes one value that Python's float() accepts.
	kindFloat
	// kindString takes one value, kept verbatim.
	kindString
	// kindJSON takes one JSON value (json, dataclass and json_or_string types); `--x.key value`
	// sets one key instead (FlexibleArgumentParser's dotted form).
	kindJSON
	// kindList is nargs="+": one or more values, up to the next option.
	kindList
	// kindAppend is action="append": one value, the flag may repeat.
	kindAppend
	// kindOptional is nargs="?": an optional value (`--hf-token` alone means True).
	kindOptional
)

// flagSpec is one `vllm serve` option with the kind the parser reads it by.
type flagSpec struct {
	names []string
	kind  flagKind
	opt   *ServeOption
}

// long is the canonical spelling, the one ServeArgs.Other records.
func (f *flagSpec) long() string { return f.names[0] }

// display is argparse's way of naming an option in an error: every spelling joined by "/".
func (f *flagSpec) display() string { return strings.Join(f.spellings(), "/") }

// spellings are the option's strings as argparse registers them: a BooleanOptionalAction puts
// each long name's `--no-` form right after it.
func (f *flagSpec) spellings() []string {
	if f.kind != kindBool {
		return f.names
	}
	out := make([]string, 0, 2*len(f.names))
	for _, n := range f.names {
		out = append(out, n)
		if strings.HasPrefix(n, "--") {
			out = append(out, "--no-"+strings.TrimPrefix(n, "--"))
		}
	}
	return out
}

// takesValue reports whether the flag consumes a following word.
func (f *flagSpec) takesValue() bool {
	return f.kind != kindBool && f.kind != kindStoreTrue && f.kind != kindHelp
}

// kindOf derives the parser's kind from vLLM's description of the option.
func kindOf(o *ServeOption) flagKind {
	switch o.Action {
	case "bool":
		return kindBool
	case "store_true":
		return kindStoreTrue
	case "help":
		return kindHelp
	case "append":
		return kindAppend
	case "lora_modules":
		return kindList
	}
	switch o.Nargs {
	case "+":
		return kindList
	case "?":
		return kindOptional
	}
	switch o.Type {
	case "int":
		return kindInt
	case "float":
		return kindFloat
	case "human_int", "human_int_or_auto":
		return kindHumanInt
	case "json", "dataclass", "json_or_string":
		return kindJSON
	}
	return kindString
}

// serveFlags is the catalog: vLLM's options (serveOptions, generated) with their kinds.
var serveFlags = sync.OnceValue(func() []flagSpec { return specsOf(serveOptions) })

// grpcServerOptions are the options of `python -m vllm.entrypoints.grpc_server`'s own parser
// (generated: grpcServerOptionNames, grpcServerOwnOptions): --host and --port, then
// AsyncEngineArgs' options. Built when first asked for: every simulated process links the
// catalog, few parse a line.
var grpcServerOptions = sync.OnceValue(func() []ServeOption {
	return entrypointOptions(grpcServerOptionNames, grpcServerOwnOptions)
})

// grpcServerFlags are grpcServerOptions with their kinds.
var grpcServerFlags = sync.OnceValue(func() []flagSpec { return specsOf(grpcServerOptions()) })

func specsOf(opts []ServeOption) []flagSpec {
	out := make([]flagSpec, len(opts))
	for i := range opts {
		o := &opts[i]
		out[i] = flagSpec{names: o.Names, kind: kindOf(o), opt: o}
	}
	return out
}

// entrypointOptions is the option list of a parser that shares most options with `vllm serve`'s:
// the options named (by first spelling) in its order, each its own entry when own has one, else
// serve's.
func entrypointOptions(names []string, own []ServeOption) []ServeOption {
	byName := map[string]ServeOption{}
	for _, o := range serveOptions {
		byName[o.Names[0]] = o
	}
	for _, o := range own {
		byName[o.Names[0]] = o
	}
	out := make([]ServeOption, 0, len(names))
	for _, n := range names {
		o, ok := byName[n]
		if !ok {
			panic("flags_vllm.go names an option it does not describe: " + n)
		}
		out = append(out, o)
	}
	return out
}

// flagRef is one spelling of an option (long, short, or `--no-x` of a BooleanOptionalAction);
// negated reports the `--no-` spelling.
type flagRef struct {
	spec    *flagSpec
	negated bool
}

// flagTable is every spelling, in argparse's registration order (an option's spellings in
// order, a boolean's `--no-` one right after them), which is the order argparse lists the
// matches of an ambiguous abbreviation in, and an index of it.
type flagTable struct {
	order []string
	index map[string]flagRef
}

var (
	serveIndex      = sync.OnceValue(func() flagTable { return indexOf(serveFlags()) })
	grpcServerIndex = sync.OnceValue(func() flagTable { return indexOf(grpcServerFlags()) })
)

// flagIndexOf is the spelling table of an entrypoint's parser (ServeArgs.Entrypoint).
func flagIndexOf(entrypoint string) flagTable {
	if entrypoint == EntrypointGRPCServer {
		return grpcServerIndex()
	}
	return serveIndex()
}

func indexOf(flags []flagSpec) flagTable {
	t := flagTable{index: make(map[string]flagRef, 2*len(flags))}
	add := func(name string, ref flagRef) {
		if _, dup := t.index[name]; !dup {
			t.order = append(t.order, name)
		}
		t.index[name] = ref
	}
	for i := range flags {
		f := &flags[i]
		for _, n := range f.spellings() {
			add(n, flagRef{spec: f, negated: f.kind == kindBool && strings.HasPrefix(n, "--no-")})
		}
	}
	return t
}

// FlagInfo describes one known `vllm serve` flag for documentation (`widetp explain --help`,
// the README) and for the conformance generator's respellings.
type FlagInfo struct {
	Names      []string
	TakesValue bool
	// Negatable: vLLM also accepts `--no-<name>` (argparse.BooleanOptionalAction).
	Negatable bool
	// Choices are the values vLLM accepts, when it restricts them.
	Choices []string
}

// KnownFlags lists every flag ParseServe accepts, in the catalog's (vLLM's parser's) order.
func KnownFlags() []FlagInfo {
	flags := serveFlags()
	out := make([]FlagInfo, 0, len(flags))
	for i := range flags {
		f := &flags[i]
		out = append(out, FlagInfo{
			Names:      append([]string(nil), f.names...),
			TakesValue: f.takesValue(),
			Negatable:  f.kind == kindBool,
			Choices:    append([]string(nil), f.opt.Choices...),
		})
	}
	return out
}

// ServeOptions returns the catalog as vLLM describes it (a copy), for comparing it with a vLLM
// checkout's parser.
func ServeOptions() []ServeOption { return copyOptions(serveOptions) }

// EntrypointOptions is the catalog of an entrypoint's parser (ServeArgs.Entrypoint): the
// `vllm serve` options for EntrypointServe, grpc_server's own for EntrypointGRPCServer.
func EntrypointOptions(entrypoint string) []ServeOption {
	if entrypoint == EntrypointGRPCServer {
		return copyOptions(grpcServerOptions())
	}
	return ServeOptions()
}

func copyOptions(opts []ServeOption) []ServeOption {
	out := make([]ServeOption, len(opts))
	for i, o := range opts {
		o.Names = append([]string(nil), o.Names...)
		o.Choices = append([]string(nil), o.Choices...)
		if len(o.Choices) == 0 {
			o.Choices = nil
		}
		o.Fields = append([]string(nil), o.Fields...)
		if len(o.Fields) == 0 {
			o.Fields = nil
		}
		out[i] = o
	}
	return out
}

// ServeOptionsSource names the vLLM the catalog was generated from.
func ServeOptionsSource() string { return serveOptionsSource }
