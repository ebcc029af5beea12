package vllm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
)

// The program names argparse prefixes its errors with: the serve subparser's for an argument it
// refuses, the top-level `vllm` parser's for words left over (parse_args' "unrecognized
// arguments"), and the OpenAI entrypoint's own parser (`python -m
// vllm.entrypoints.openai.api_server`, prog "api_server.py") for both.
const (
	progServe     = "vllm serve"
	progTop       = "vllm"
	progAPIServer = "api_server.py"
	// progGRPCServer: python -m vllm.entrypoints.grpc_server.
	progGRPCServer = "grpc_server.py"
)

// HelpExit is a line that asks for the help (-h/--help): argparse prints it and exits with
// status 0, so the line starts no server.
type HelpExit struct{ Prog string }

func (e *HelpExit) Error() string {
	prog := e.Prog
	if prog == "" {
		prog = progServe
	}
	return prog + ": -h/--help prints the help and exits (status 0): the line starts no server"
}

// jsonObjectLike is union_dict_and_str's test for a value it reads as JSON.
var jsonObjectLike = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)^\s*\{.*\}\s*$`) })

// checkValue checks one value of an option as argparse does (vllm/utils/argparse_utils.py and
// vllm/engine/arg_utils.py give the types): its type= converts it, then the converted value must
// be one of its choices.
func checkValue(spec *flagSpec, val string) error {
	o := spec.opt
	bad := func(reason string) error { return &ArgError{Flag: spec.display(), Value: val, Reason: reason} }
	if o.Nullable && (val == "" || val == "None") {
		// optional_type's None: never among the choices, which argparse keeps as strings.
		return checkChoice(spec, "None")
	}
	repr := pyRepr(val)
	switch o.Type {
	case "int":
		n, err := pyInt(val)
		if err != nil {
			return bad(typeError(o, "int", val))
		}
		repr = strconv.Itoa(n)
	case "float":
		if _, err := pyFloat(val); err != nil {
			return bad(typeError(o, "float", val))
		}
	case "human_int", "human_int_or_auto":
		t := strings.TrimSpace(val)
		if o.Type == "human_int_or_auto" && (t == "-1" || strings.ToLower(t) == "auto") {
			break
		}
		if m := humanSuffix().FindStringSubmatch(t); m != nil && binaryShift[m[2]] > 0 && strings.Contains(m[1], ".") {
			// human_readable_int raises ArgumentTypeError, which argparse prints as it is.
			return bad(fmt.Sprintf("Decimals are not allowed with binary suffixes like %s. Did you mean to use %s%s instead?", m[2], m[1], strings.ToLower(m[2])))
		}
		if _, ok := humanReadableInt(val); !ok {
			fn := "human_readable_int"
			if o.Type == "human_int_or_auto" {
				fn = "human_readable_int_or_auto"
			}
			return bad(typeError(o, fn, val))
		}
	case "json":
		if _, err := decodeJSON(val); err != nil {
			return bad(typeError(o, "loads", val))
		}
	case "json_or_string":
		if jsonObjectLike().MatchString(val) {
			if _, err := decodeJSON(val); err != nil {
				// union_dict_and_str hands an object-like value to optional_type(json.loads).
				return bad(fmt.Sprintf("Value %s cannot be converted to <function loads>.", val))
			}
		}
	case "string_lower_underscore":
		repr = pyRepr(strings.ReplaceAll(strings.ToLower(val), "-", "_"))
	}
	return checkChoice(spec, repr)
}

// typeError is argparse's message for a value the type refuses: its own "invalid <type> value"
// for a bare type, or the "Value X cannot be converted to T." of arg_utils' optional_type and
// parse_type wrappers (which print a function with its address, left out here).
func typeError(o *ServeOption, fn, val string) string {
	if !o.Wrapped {
		return fmt.Sprintf("invalid %s value: %s", fn, pyRepr(val))
	}
	target := "<function " + fn + ">"
	if fn == "int" || fn == "float" {
		target = "<class '" + fn + "'>"
	}
	return fmt.Sprintf("Value %s cannot be converted to %s.", val, target)
}

// checkChoice refuses a converted value (given as its repr) that is not among the choices.
func checkChoice(spec *flagSpec, repr string) error {
	choices := spec.opt.Choices
	if len(choices) == 0 {
		return nil
	}
	for _, c := range choices {
		if c == repr {
			return nil
		}
	}
	return &ArgError{Flag: spec.display(), Value: repr,
		Reason: fmt.Sprintf("invalid choice: %s (choose from %s)", repr, strings.Join(choices, ", "))}
}

// checkFields refuses a key a config dataclass does not have (pydantic's
// unexpected_keyword_argument), when the catalog lists the class's fields.
// checkConfig is pydantic's validation of a config dataclass's JSON object: against the
// catalog's schema of the class (configschema.go) when it has one, else (a class whose
// validation a function of its own the model does not run comes first) its keys alone.
func checkConfig(spec *flagSpec, val string, obj map[string]any) error {
	if s := parsedSchema(spec.opt.Schema); s != nil && s.T != "any" && (s.T != "before" || ModelsValidator(s.Fn)) {
		if errs := validateConfig(s, obj); len(errs) > 0 {
			for _, e := range errs {
				if e.raise != nil {
					return e.raise
				}
			}
			return configError(spec, val, errs)
		}
		return nil
	}
	return checkFields(spec, obj)
}

func checkFields(spec *flagSpec, obj map[string]any) error {
	fields := spec.opt.Fields
	if len(fields) == 0 {
		return nil
	}
	unknown := unknownKeys(fields, obj)
	if len(unknown) == 0 {
		return nil
	}
	errs := make([]schemaError, len(unknown))
	for i, k := range unknown {
		errs[i] = schemaError{loc: k, msg: "Unexpected keyword argument", val: obj[k]}
	}
	return configError(spec, unknown[0], errs)
}

// unknownKeys are the keys of obj not among fields (a sorted list), sorted: a Go map keeps no
// order.
func unknownKeys(fields []string, obj map[string]any) []string {
	var unknown []string
	for k := range obj {
		if i := sort.SearchStrings(fields, k); i == len(fields) || fields[i] != k {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	return unknown
}

// pyRepr is Python's repr() of a str: single quotes unless the text holds one and no double
// quote, backslash escapes for the quote, backslashes and unprintable characters.
func pyRepr(s string) string {
	quote := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == quote:
			b.WriteRune('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == unicode.ReplacementChar || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteRune(quote)
	return b.String()
}

// checkLoRAModule is cli_args.LoRAParserAction on one value of --lora-modules: `name=path`, or a
// JSON object of LoRAModulePath's fields (vllm/entrypoints/openai/models/protocol.py).
func checkLoRAModule(item string) error {
	if item == "" {
		return nil
	}
	if strings.Contains(item, "=") && !strings.Contains(item, ",") {
		if strings.Count(item, "=") != 1 {
			// name, path = item.split("="): raised, not an argparse error.
			return &PyError{Type: "ValueError", Msg: "too many values to unpack (expected 2)"}
		}
		return nil
	}
	v, err := decodeJSON(item)
	if err != nil {
		return &ArgError{Reason: "Invalid JSON format for --lora-modules: " + item}
	}
	invalid := func(why string) error {
		return &ArgError{Reason: fmt.Sprintf("Invalid fields for --lora-modules: %s - %s", item, why)}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return invalid("vllm.entrypoints.openai.models.protocol.LoRAModulePath() argument after ** must be a mapping, not " + pyTypeName(v))
	}
	var unknown []string
	for k := range obj {
		switch k {
		case "name", "path", "base_model_name", "is_3d_lora_weight":
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return invalid(fmt.Sprintf("LoRAModulePath.__init__() got an unexpected keyword argument %s", pyRepr(unknown[0])))
	}
	var missing []string
	for _, k := range []string{"name", "path"} {
		if _, ok := obj[k]; !ok {
			missing = append(missing, pyRepr(k))
		}
	}
	switch len(missing) {
	case 1:
		return invalid("LoRAModulePath.__init__() missing 1 required positional argument: " + missing[0])
	case 2:
		return invalid("LoRAModulePath.__init__() missing 2 required positional arguments: " + missing[0] + " and " + missing[1])
	}
	return nil
}

// pyJSONDumps is Python's json.dumps with its defaults (", " and ": " separators, non-ASCII
// escaped) of a decoded value; object keys in sorted order.
func pyJSONDumps(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case nil:
			b.WriteString("null")
		case bool:
			b.WriteString(strconv.FormatBool(x))
		case json.Number:
			b.WriteString(x.String())
		case string:
			b.WriteByte('"')
			for _, r := range x {
				switch {
				case r == '"' || r == '\\':
					b.WriteByte('\\')
					b.WriteRune(r)
				case r == '\n':
					b.WriteString(`\n`)
				case r == '\r':
					b.WriteString(`\r`)
				case r == '\t':
					b.WriteString(`\t`)
				case r < 0x20 || r > 0x7e:
					if r > 0xffff {
						r1, r2 := utf16.EncodeRune(r)
						fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
					} else {
						fmt.Fprintf(&b, `\u%04x`, r)
					}
				default:
					b.WriteRune(r)
				}
			}
			b.WriteByte('"')
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteString(", ")
				}
				walk(e)
			}
			b.WriteByte(']')
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteString(", ")
				}
				walk(k)
				b.WriteString(": ")
				walk(x[k])
			}
			b.WriteByte('}')
		default:
			fmt.Fprint(&b, x)
		}
	}
	walk(v)
	return b.String()
}
