package conform_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/probe"
)

// The model's catalog of `vllm serve` options is vLLM's: generated from the snapshot's parser
// (`make flags`), it must list the same options, spellings, actions, types and choices as the
// parser vllm/entrypoints/cli/serve.py builds (cli_args.make_arg_parser over
// arg_utils.EngineArgs.add_cli_args) in the snapshot.
//
// So must the catalog of `python -m vllm.entrypoints.grpc_server`'s parser, which its main()
// builds: --host and --port, then AsyncEngineArgs.add_cli_args.
func TestFlagCatalogIsTheSnapshots(t *testing.T) {
	pl := planner(t)
	for _, entry := range []string{vllm.EntrypointServe, vllm.EntrypointGRPCServer} {
		t.Run(entry, func(t *testing.T) {
			got, err := pl.EntrypointFlags(context.Background(), entry)
			if err != nil {
				t.Fatal(err)
			}
			sameCatalog(t, got, vllm.EntrypointOptions(entry))
		})
	}
}

func sameCatalog(t *testing.T, got, want []vllm.ServeOption) {
	if reflect.DeepEqual(got, want) {
		return
	}
	byName := func(opts []vllm.ServeOption) map[string]vllm.ServeOption {
		m := map[string]vllm.ServeOption{}
		for _, o := range opts {
			m[o.Names[0]] = o
		}
		return m
	}
	v, m := byName(got), byName(want)
	for n, o := range v {
		if mo, ok := m[n]; !ok {
			t.Errorf("vLLM has %s (%+v), the catalog does not", n, o)
		} else if !reflect.DeepEqual(o, mo) {
			t.Errorf("%s: vLLM %+v, catalog %+v", n, o, mo)
		}
	}
	for n := range m {
		if _, ok := v[n]; !ok {
			t.Errorf("the catalog has %s, vLLM does not", n)
		}
	}
	t.Error("the catalog is not the snapshot's: regenerate it with `make flags VLLM=<the snapshot>`, or the order differs")
}

// vLLM's own parser (vllm/utils/argparse_utils.py FlexibleArgumentParser, run by the probe's
// parse op) judges ParseServe on lines built from every option of the catalog: a value of its
// type and one it refuses, its choices and a value outside them, `--no-`, `=`, short aliases,
// abbreviations, unknown words, and the OpenAI entrypoint's parser. The two must accept the
// same lines, and refuse the rest with the same message (pydantic's messages for a config
// dataclass excepted: only the option they name is compared).
func TestParseServeAgreesWithVLLMsParser(t *testing.T) {
	lines := parserCorpus()
	res := parseWithVLLM(t, planner(t), lines)
	bad := 0
	for i, line := range lines {
		gExit, gMsg, gRaised := goParse(line)
		v := res[i]
		if agree(v, gExit, gMsg, gRaised) {
			continue
		}
		bad++
		if bad <= 40 {
			vr := outcome(v.Exit, v.Message)
			if v.Raised != "" {
				vr = "raised " + v.Raised
			}
			gr := outcome(gExit, gMsg)
			if gRaised != "" {
				gr = "raised " + gRaised
			}
			t.Errorf("%s\n  vLLM:  %s\n  model: %s", line, vr, gr)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d lines parsed differently", bad, len(lines))
	}
	t.Logf("%d lines, each parsed alike by vLLM and the model", len(lines))
}

// goParse is the model's reading of a line: nil exit when it parses, else argparse's exit
// status and message, or the exception vLLM's parser raises (exit nil, raised).
// parseWithVLLM runs vLLM's parser on each command line, through the probe.
func parseWithVLLM(t *testing.T, pl *probe.Planner, lines []string) []probe.ParseResult {
	t.Helper()
	plines := make([]probe.ParseLine, len(lines))
	for i, line := range lines {
		l, err := vllm.SplitLaunch(line)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		plines[i] = probe.ParseLine{Argv: l.Args, Entrypoint: l.Entrypoint}
	}
	res, err := pl.Parse(context.Background(), plines)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func goParse(line string) (exit *int, msg string, raised string) {
	_, err := vllm.ParseServe(line)
	if err == nil {
		return nil, "", ""
	}
	var pe *vllm.PyError
	if errors.As(err, &pe) {
		return nil, "", pe.Error()
	}
	code := 2
	var he *vllm.HelpExit
	if errors.As(err, &he) {
		code = 0
	}
	return &code, err.Error(), ""
}

// address is a Python function's address in its repr, which the model leaves out.
var address = regexp.MustCompile(` at 0x[0-9a-f]+>`)

func agree(v probe.ParseResult, gExit *int, gMsg, gRaised string) bool {
	if v.Raised != "" || gRaised != "" {
		return v.Raised == gRaised
	}
	if (v.Exit == nil) != (gExit == nil) {
		return false
	}
	if v.Exit == nil {
		return true
	}
	if *v.Exit != *gExit {
		return false
	}
	if *gExit == 0 {
		return true // the help text itself is not the model's
	}
	if strings.Contains(v.Message, "validation error") {
		// pydantic's report: compare the option it names.
		head := func(s string) string {
			if i := strings.Index(s, ": "); i >= 0 {
				if j := strings.Index(s[i+2:], ": "); j >= 0 {
					return s[:i+2+j]
				}
			}
			return s
		}
		return head(v.Message) == head(gMsg)
	}
	return address.ReplaceAllString(v.Message, ">") == gMsg
}

func outcome(exit *int, msg string) string {
	if msg == "" && exit == nil {
		return "parses"
	}
	if exit == nil {
		return "parses"
	}
	return fmt.Sprintf("exit %d: %s", *exit, msg)
}

// parserCorpus builds the lines: for every option of the catalog, lines that exercise how
// argparse reads it, and a set of lines about words argparse cannot place; then the same for
// grpc_server's own parser.
func parserCorpus() []string {
	lines := optionLines("vllm serve org/M", vllm.ServeOptions())
	lines = append(lines,
		"python -m vllm.entrypoints.openai.api_server --model org/M --foo",
		"python -m vllm.entrypoints.openai.api_server --model org/M -tp x",
		"python -m vllm.entrypoints.openai.api_server --model org/M --dtype nope",
		"python -m vllm.entrypoints.openai.api_server --model org/M -h",
	)
	// Python's float() grammar (argparse's type=float; pydantic's lax float from a string).
	for _, f := range []string{"0x1p-1", "_0.5", "0__5", "0_0.5", "' 0.5 '", ".5e0", "5.e-1", "Infinity", "-nan", "1e-400", "0.5_", "1e5_0"} {
		lines = append(lines, "vllm serve org/M --gpu-memory-utilization "+f)
	}
	const grpc = "python -m vllm.entrypoints.grpc_server"
	lines = append(lines, optionLines(grpc+" --model org/M", vllm.EntrypointOptions(vllm.EntrypointGRPCServer))...)
	for _, l := range []string{
		"org/M", "org/M --model org/M", "--model org/M -- -tp 2", "--model org/M --headless",
		"--model org/M --api-server-count 2", "--model org/M --grpc", "--model org/M --host None",
		"--model org/M --host ''", "--model org/M --port x", "--model org/M --uds /tmp/s",
		"--model org/M --served-model-name a b", "--model org/M -h", "-tp 2",
	} {
		lines = append(lines, grpc+" "+l)
	}
	return lines
}

// optionLines are lines after prefix (a program and its model) about every option of opts.
func optionLines(model string, opts []vllm.ServeOption) []string {
	var lines []string
	add := func(args string) { lines = append(lines, model+" "+args) }
	for _, o := range opts {
		name := o.Names[0]
		if name == "--config" {
			continue // a YAML file vLLM reads; the model reads no files and refuses the option
		}
		for _, alias := range o.Names[1:] {
			if o.Action == "help" {
				continue
			}
			if o.Action == "bool" || o.Action == "store_true" {
				add(alias)
			} else {
				add(alias + " " + sampleValue(o))
			}
		}
		switch o.Action {
		case "help":
			add(name)
			continue
		case "bool":
			add(name)
			add("--no-" + strings.TrimPrefix(name, "--"))
			add(name + "=1")
			continue
		case "store_true":
			add(name)
			add(name + "=1")
			continue
		}
		v := sampleValue(o)
		add(name + " " + quote(v))
		add(name + "=" + quote(v))
		add("--" + strings.ReplaceAll(strings.TrimPrefix(name, "--"), "-", "_") + " " + quote(v))
		add(name) // no value
		if o.Nullable {
			add(name + " None")
			add(name + " ''")
		}
		for _, bad := range badValues(o) {
			add(name + " " + quote(bad))
		}
		for _, c := range o.Choices {
			add(name + " " + quote(unrepr(c)))
		}
		if len(o.Choices) > 0 {
			add(name + " bogus-choice")
			if o.Type == "string_lower_underscore" {
				for _, c := range o.Choices {
					if u := unrepr(c); strings.Contains(u, "_") {
						add(name + " " + strings.ToUpper(strings.ReplaceAll(u, "_", "-")))
						break
					}
				}
			}
		}
		if o.Nargs == "+" {
			add(name + " " + v + " " + v)
		}
		if o.Action == "append" {
			add(name + " " + v + " " + name + " " + v)
		}
		if o.Type == "dataclass" || o.Type == "json" || o.Type == "json_or_string" {
			add(name + ".widetp_key 1")
		}
	}
	// Abbreviations: every long option's prefixes from 4 characters up to its whole name less
	// one (unique ones stand for it; shared ones are ambiguous).
	seen := map[string]bool{}
	for _, o := range opts {
		name := o.Names[0]
		if !strings.HasPrefix(name, "--") {
			continue
		}
		for n := 4; n < len(name); n += 3 {
			p := name[:n]
			if seen[p] {
				continue
			}
			seen[p] = true
			if o.Action == "bool" || o.Action == "store_true" || o.Action == "help" {
				add(p)
			} else {
				add(p + " " + quote(sampleValue(o)))
			}
		}
	}
	for _, l := range []string{
		"--tensor-paralel-size 2 -tp 2", "--foo 4 --bar -tp 2", "--foo -tp x", "-tp 2 extra", "extra2 -tp 2",
		"-- -tp", "-tp 2 -- x", "-n4", "-r1 -n2", "-tp2", "-d 1", "-dp=2", "-as 2", "-e", "-q4",
		"--model org/M", "--seed -1", "--seed=-1", "-tp -1", "--max-model-len -1", "--max-model-len AUTO",
		"--max-model-len 1_000", "--max-model-len +5", "--max-num-batched-tokens 2.5M",
		"--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\",\"bogus\":1}'",
		"--kv-transfer-config.kv_connector NixlConnector --kv-transfer-config.kv_role kv_both --kv-transfer-config.bogus 1",
		"--compilation-config '{\"level\": 3}'", "--compilation-config 3", "-O3", "-O 3", "-O.mode 3", "-cc.mode 3",
		"--hf-overrides '{bad'", "--hf-overrides '{\"a\": 1}'", "--allowed-origins '[\"*\"]'",
		"--tensor-parallel-size.x 1", "--enable-eplb.x 1", "--help.x 1", "--headless --api-server-count 0",
	} {
		add(l)
	}
	return lines
}

// sampleValue is a value the option's type accepts.
func sampleValue(o vllm.ServeOption) string {
	if len(o.Choices) > 0 {
		return unrepr(o.Choices[0])
	}
	switch o.Type {
	case "int":
		return "3"
	case "float":
		return "0.5"
	case "human_int", "human_int_or_auto":
		return "2k"
	case "json":
		return `{"a": 1}`
	case "dataclass":
		return "{}"
	case "json_or_string":
		return "plain"
	}
	return "value"
}

// badValues are values the option's type refuses (none for a plain string).
func badValues(o vllm.ServeOption) []string {
	switch o.Type {
	case "int":
		return []string{"x", "1.5"}
	case "float":
		return []string{"x"}
	case "human_int", "human_int_or_auto":
		return []string{"x", "1.5K", "1.5k"}
	case "json":
		return []string{"nojson"}
	case "dataclass":
		return []string{"nojson", "[1]", `{"widetp_bogus": 1}`}
	case "json_or_string":
		return []string{"{bad}"}
	}
	return nil
}

// unrepr turns a choice's repr back into the word that gives it.
func unrepr(c string) string {
	if len(c) >= 2 && (c[0] == '\'' || c[0] == '"') {
		return c[1 : len(c)-1]
	}
	return c
}

func quote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.ContainsAny(s, " {}[]\"'*$\\") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
