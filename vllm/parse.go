package vllm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// envAssignment is a shell variable assignment word (`NAME=value`) before the program name.
var envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// ParseServe parses one `vllm serve` command line as a shell and then vLLM's argument parser
// would (vllm/utils/argparse_utils.py FlexibleArgumentParser over cli_args.make_arg_parser):
// shell quoting and backslashes; leading NAME=value assignments (kept in Env); the model as the
// positional model_tag or --model; every flag of the catalog (KnownFlags) in its long form, its
// short aliases, with underscores for dashes (`--tensor_parallel_size`), as `--flag=value` or
// `--flag value`; `--no-<flag>` for boolean flags; `--<json-flag>.key value` for one key of a JSON
// flag. Unknown flags, missing values, non-integer or negative sizes and bad JSON are errors that
// name the flag and the value: *ArgError for what argparse (or the pydantic field constraints)
// rejects, *ShellError for a line the shell cannot split.
//
// A unique prefix of a long option stands for it, as argparse's allow_abbrev allows. Not
// supported, and rejected with an error rather than guessed: --config (the model reads no files).
func ParseServe(cmdline string) (*ServeArgs, error) {
	words, err := splitWords(cmdline)
	if err != nil {
		return nil, err
	}
	a := newServeArgs()
	i := 0
	for ; i < len(words) && envAssignment.MatchString(words[i]); i++ {
		if a.Env == nil {
			a.Env = map[string]string{}
		}
		k, v, _ := strings.Cut(words[i], "=")
		a.Env[k] = v
	}
	if i >= len(words) {
		return nil, &ArgError{Reason: "empty command: expected `vllm serve ...`"}
	}
	if prog := words[i]; prog != "vllm" && path.Base(prog) != "vllm" {
		return nil, &ArgError{Value: prog, Reason: fmt.Sprintf("not a vllm command: %q (expected `vllm serve ...`)", prog)}
	}
	if i+1 >= len(words) || words[i+1] != "serve" {
		sub := ""
		if i+1 < len(words) {
			sub = words[i+1]
		}
		return nil, &ArgError{Value: sub, Reason: fmt.Sprintf("expected the serve subcommand after vllm, got %q", sub)}
	}
	a.Argv = append([]string(nil), words[i:]...)
	p := &argParser{args: a, words: words[i+2:]}
	if err := p.run(); err != nil {
		return nil, err
	}
	return a, nil
}

// argParser walks the words after `vllm serve`.
type argParser struct {
	args     *ServeArgs
	words    []string
	pos      int
	modelTag *string
	modelOpt *string
	// kv is the --kv-transfer-config object being assembled (JSON plus dotted keys).
	kv     map[string]any
	kvSeen bool
}

func (p *argParser) run() error {
	onlyPositionals := false
	for p.pos < len(p.words) {
		w := p.words[p.pos]
		p.pos++
		if !onlyPositionals && w == "--" {
			onlyPositionals = true
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
	switch {
	case p.modelTag != nil:
		p.args.Model = *p.modelTag
	case p.modelOpt != nil:
		p.args.Model = *p.modelOpt
	}
	if p.kvSeen {
		kv, err := kvTransferFromMap(p.kv)
		if err != nil {
			return err
		}
		p.args.KVTransfer = kv
	}
	return nil
}

// negativeNumber is argparse's _negative_number_matcher: since no option looks like a negative
// number, such a word is a value ("--seed -1").
var negativeNumber = regexp.MustCompile(`^-\d+$|^-\d*\.\d+$`)

// looksLikeOption is argparse's test for an option string: a leading '-', not "-" alone and not
// a negative number.
func looksLikeOption(w string) bool {
	return len(w) >= 2 && w[0] == '-' && !negativeNumber.MatchString(w)
}

func (p *argParser) positional(w string) error {
	if p.modelTag != nil {
		return &ArgError{Value: w, Reason: "unrecognized arguments: " + w}
	}
	p.modelTag = &w
	return nil
}

// option handles one option word (and the values it consumes).
func (p *argParser) option(w string) error {
	name, explicit, hasExplicit := strings.Cut(w, "=")
	base, key, dotted := strings.Cut(name, ".")
	if strings.HasPrefix(base, "--") {
		// FlexibleArgumentParser accepts underscores in long options: --tensor_parallel_size.
		base = strings.ReplaceAll(base, "_", "-")
	} else if strings.HasPrefix(name, "-O") && len(name) > 2 && name[2] != '.' && !hasExplicit {
		// FlexibleArgumentParser's -O<level> shorthand (-O3).
		base, explicit, hasExplicit, dotted = "-O", name[2:], true, false
	}
	ref, ok := flagIndex[base]
	if !ok && strings.HasPrefix(base, "--") {
		// argparse's allow_abbrev (FlexibleArgumentParser keeps the default): a unique prefix of
		// a long option stands for it.
		var matches []string
		for name := range flagIndex {
			if strings.HasPrefix(name, "--") && strings.HasPrefix(name, base) {
				matches = append(matches, name)
			}
		}
		sort.Strings(matches)
		switch len(matches) {
		case 0:
		case 1:
			ref, ok = flagIndex[matches[0]], true
			base = matches[0]
		default:
			return &ArgError{Value: w, Reason: fmt.Sprintf("ambiguous option: %s could match %s", base, strings.Join(matches, ", "))}
		}
	}
	if !ok {
		return &ArgError{Value: w, Reason: "unrecognized arguments: " + w}
	}
	spec := ref.spec
	if dotted {
		if spec.kind != kindJSON || ref.negated {
			return &ArgError{Value: w, Reason: "unrecognized arguments: " + w}
		}
		val, err := p.value(spec, explicit, hasExplicit)
		if err != nil {
			return err
		}
		return p.dotted(spec, key, val)
	}
	switch spec.kind {
	case kindBool, kindStoreTrue:
		if hasExplicit {
			return &ArgError{Flag: base, Value: explicit, Reason: fmt.Sprintf("ignored explicit argument %q", explicit)}
		}
		return p.setBool(spec, ref.negated)
	case kindList:
		vals, err := p.list(spec, explicit, hasExplicit)
		if err != nil {
			return err
		}
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

// sizeMin is the lower bound vLLM's pydantic fields put on each bounded integer
// (vllm/config/parallel.py ParallelConfig: Field(ge=1) on the sizes, ge=0 on ranks; the rpc port
// is ge=1, le=65535).
var sizeMin = map[string]int{
	"--tensor-parallel-size":          1,
	"--pipeline-parallel-size":        1,
	"--prefill-context-parallel-size": 1,
	"--decode-context-parallel-size":  1,
	"--data-parallel-size":            1,
	"--nnodes":                        1,
	"--data-parallel-rpc-port":        1,
}

// set stores one flag value, validating it as argparse's type= and the pydantic field would.
func (p *argParser) set(spec *flagSpec, val string) error {
	a := p.args
	flag := spec.long()
	switch spec.kind {
	case kindSize:
		n, err := pyInt(val)
		if err != nil {
			return &ArgError{Flag: spec.display(), Value: val, Reason: fmt.Sprintf("invalid int value: %q", val)}
		}
		if lo := sizeMin[flag]; n < lo {
			return &ArgError{Flag: spec.display(), Value: val, Reason: fmt.Sprintf("Input should be greater than or equal to %d [input_value=%s]", lo, val)}
		}
		if flag == "--data-parallel-rpc-port" && n > 65535 {
			return &ArgError{Flag: spec.display(), Value: val, Reason: fmt.Sprintf("Input should be less than or equal to 65535 [input_value=%s]", val)}
		}
		return p.setSize(flag, n)
	case kindInt:
		if _, err := pyInt(val); err != nil {
			return &ArgError{Flag: spec.display(), Value: val, Reason: fmt.Sprintf("invalid int value: %q", val)}
		}
	case kindHumanInt:
		if !humanInt.MatchString(strings.TrimSpace(val)) {
			return &ArgError{Flag: spec.display(), Value: val, Reason: fmt.Sprintf("invalid human_readable_int value: %q", val)}
		}
	case kindFloat:
		if _, err := pyFloat(val); err != nil {
			return &ArgError{Flag: spec.display(), Value: val, Reason: fmt.Sprintf("invalid float value: %q", val)}
		}
	case kindJSON:
		if flag == "--kv-transfer-config" {
			obj, err := jsonObject(val)
			if err != nil {
				return &ArgError{Flag: spec.display(), Value: val, Reason: err.Error()}
			}
			p.kv, p.kvSeen = obj, true
			return nil
		}
		if strings.HasPrefix(strings.TrimSpace(val), "{") {
			if _, err := jsonObject(val); err != nil {
				return &ArgError{Flag: spec.display(), Value: val, Reason: err.Error()}
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
			v := val
			a.DistributedExecutorBackend = &v
			return nil
		}
	}
	v := val
	p.other(flag, &v)
	return nil
}

func (p *argParser) setSize(flag string, n int) error {
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
		s := strconv.Itoa(n)
		p.other(flag, &s)
	}
	return nil
}

// dotted sets one key of a JSON flag (`--kv-transfer-config.kv_role kv_both`); the value is
// decoded as JSON when it is valid JSON and kept as a string otherwise.
func (p *argParser) dotted(spec *flagSpec, key, val string) error {
	if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
		return &ArgError{Flag: spec.display(), Value: key, Reason: fmt.Sprintf("invalid key %q", key)}
	}
	if spec.long() != "--kv-transfer-config" {
		v := key + "=" + val
		p.other(spec.long()+".", &v)
		return nil
	}
	if p.kv == nil {
		p.kv = map[string]any{}
	}
	p.kvSeen = true
	var decoded any = val
	if v, err := decodeJSON(val); err == nil {
		decoded = v
	}
	parts := strings.Split(key, ".")
	m := p.kv
	for _, part := range parts[:len(parts)-1] {
		next, ok := m[part].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[part] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = decoded
	return nil
}

// humanInt is arg_utils.human_readable_int: digits with an optional k/m/g/t multiplier (decimal
// with a lowercase letter, binary with an uppercase one; fractions allowed with a suffix).
var humanInt = regexp.MustCompile(`^(\d+|\d+\.\d+[kKmMgGtT])([kKmMgGtT])?$`)

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

// pyFloat parses what Python's float() accepts for the usual spellings.
func pyFloat(s string) (float64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	switch strings.ToLower(strings.TrimLeft(t, "+-")) {
	case "inf", "infinity", "nan":
		return 0, nil
	}
	return strconv.ParseFloat(t, 64)
}

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

// kvRoles are vllm/config/kv_transfer.py KVRole's values.
var kvRoles = []string{"kv_producer", "kv_consumer", "kv_both"}

// kvTransferFromMap validates --kv-transfer-config as pydantic validates KVTransferConfig inside
// argparse's type= (so a bad value is an argparse error, exit status 2).
func kvTransferFromMap(m map[string]any) (*KVTransferConfig, error) {
	bad := func(field, msg string) error {
		return &ArgError{Flag: "--kv-transfer-config", Value: field,
			Reason: fmt.Sprintf("1 validation error for KVTransferConfig: %s: %s", field, msg)}
	}
	kv := &KVTransferConfig{Raw: m}
	optString := func(field string) (*string, error) {
		v, ok := m[field]
		if !ok || v == nil {
			return nil, nil
		}
		s, isStr := v.(string)
		if !isStr {
			return nil, bad(field, "Input should be a valid string")
		}
		return &s, nil
	}
	conn, err := optString("kv_connector")
	if err != nil {
		return nil, err
	}
	if conn != nil {
		kv.Connector = *conn
	}
	if kv.EngineID, err = optString("engine_id"); err != nil {
		return nil, err
	}
	role, err := optString("kv_role")
	if err != nil {
		return nil, err
	}
	if role != nil {
		valid := false
		for _, r := range kvRoles {
			valid = valid || *role == r
		}
		if !valid {
			return nil, bad("kv_role", fmt.Sprintf("Input should be 'kv_producer', 'kv_consumer' or 'kv_both' [input_value=%q]", *role))
		}
		kv.Role = *role
	}
	if v, ok := m["kv_connector_extra_config"]; ok {
		extra, isObj := v.(map[string]any)
		if !isObj {
			return nil, bad("kv_connector_extra_config", "Input should be a valid dictionary")
		}
		kv.ExtraConfig = extra
	}
	if conn != nil && role == nil {
		return nil, bad("kv_role", "Value error, Please specify kv_role when kv_connector is set, supported roles are ('kv_producer', 'kv_consumer', 'kv_both')")
	}
	return kv, nil
}
