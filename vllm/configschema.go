package vllm

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// configSchema is the part of a config dataclass's pydantic core schema the model checks a
// --*-config JSON against: its fields' types and bounds as pydantic validates JSON in lax mode.
// The catalog carries it (ServeOption.Schema, written by the probe's flags.py _compact from
// TypeAdapter(cls).core_schema); what a validator function of the class does is not in it
// ("any", or the inner type of an after-validator), nor what __post_init__ raises.
type configSchema struct {
	T string `json:"t"`
	// S is the inner schema (nullable), the items' (list) or the values' (dict); K the keys'.
	S *configSchema `json:"s,omitempty"`
	K *configSchema `json:"k,omitempty"`
	// C are a union's members.
	C []*configSchema `json:"c,omitempty"`
	// F are a dataclass's init fields; Forbid: keys it lacks are errors.
	F      []schemaField `json:"f,omitempty"`
	Forbid bool          `json:"forbid,omitempty"`
	// V are a literal's or an enum's values; Sub an enum's value type (str, int, float). Names
	// are an enum's member names, aliases too (__members__), as Enum[name] looks them up.
	V     []any    `json:"v,omitempty"`
	Names []string `json:"names,omitempty"`
	// Fn names the validator function a "before" schema runs ahead of S (its qualified name).
	Fn  string `json:"fn,omitempty"`
	Sub string `json:"sub,omitempty"`
	// Bounds of an int or float.
	Ge *json.Number `json:"ge,omitempty"`
	Gt *json.Number `json:"gt,omitempty"`
	Le *json.Number `json:"le,omitempty"`
	Lt *json.Number `json:"lt,omitempty"`
}

type schemaField struct {
	Name     string        `json:"n"`
	Schema   *configSchema `json:"s"`
	Required bool          `json:"req,omitempty"`
}

// schemaError is one of pydantic's errors: where, what, and the value it refused. raise is an
// exception a validator function raised that pydantic does not collect (not a ValueError nor an
// AssertionError): it ends the validation, and is what the caller raises.
type schemaError struct {
	loc, msg string
	val      any
	raise    error
}

var schemaCache sync.Map // Schema text → *configSchema

// parsedSchema decodes an option's schema once; nil when it has none.
func parsedSchema(text string) *configSchema {
	if text == "" {
		return nil
	}
	if s, ok := schemaCache.Load(text); ok {
		return s.(*configSchema)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var s configSchema
	if err := dec.Decode(&s); err != nil {
		panic(fmt.Sprintf("the flag catalog's config schema does not decode: %v", err))
	}
	schemaCache.Store(text, &s)
	return &s
}

// validateConfig is TypeAdapter(cls).validate_json's field validation of a decoded config: every
// error, in the order pydantic reports them (fields in the class's order, then the keys it lacks).
func validateConfig(s *configSchema, v any) []schemaError {
	var errs []schemaError
	s.validate(v, "", &errs)
	return errs
}

func (s *configSchema) validate(v any, loc string, errs *[]schemaError) {
	fail := func(msg string) { *errs = append(*errs, schemaError{loc: loc, msg: msg, val: v}) }
	switch s.T {
	case "nullable":
		if v != nil {
			s.S.validate(v, loc, errs)
		}
	case "union":
		// Smart mode: the first member that takes the value wins; none does, every member's
		// errors are reported.
		var all []schemaError
		for _, c := range s.C {
			var e []schemaError
			c.validate(v, loc, &e)
			if len(e) == 0 {
				return
			}
			all = append(all, e...)
		}
		*errs = append(*errs, all...)
	case "int":
		n, msg := laxInt(v)
		if msg != "" {
			fail(msg)
			return
		}
		if msg := s.bounds(new(big.Float).SetInt(n)); msg != "" {
			fail(msg)
		}
	case "float":
		f, msg := laxFloat(v)
		if msg != "" {
			fail(msg)
			return
		}
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			if msg := s.bounds(big.NewFloat(f)); msg != "" {
				fail(msg)
			}
		}
	case "bool":
		if _, msg := pydanticBool(v); msg != "" {
			fail(msg)
		}
	case "str":
		if _, ok := v.(string); !ok {
			fail("Input should be a valid string")
		}
	case "before":
		run, ok := beforeValidators[s.Fn]
		if !ok {
			return // a function the model does not know may take anything
		}
		r := run(v, s.S)
		switch {
		case r.raise != nil:
			*errs = append(*errs, schemaError{loc: loc, raise: r.raise})
		case r.valueError != "":
			fail("Value error, " + r.valueError)
		case r.member:
		case r.replaced:
			s.S.validate(r.value, loc, errs)
		default:
			s.S.validate(v, loc, errs)
		}
	case "literal", "enum":
		if _, ok := v.(enumMember); ok && s.T == "enum" {
			return
		}
		if !s.matches(v) {
			fail("Input should be " + orList(s.V))
		}
	case "list":
		items, ok := v.([]any)
		if !ok {
			fail("Input should be a valid list")
			return
		}
		for i, it := range items {
			s.S.validate(it, joinLoc(loc, fmt.Sprint(i)), errs)
		}
	case "dict":
		m, ok := v.(map[string]any)
		if !ok {
			fail("Input should be a valid dictionary")
			return
		}
		for _, k := range sortedKeys(m) {
			s.K.validate(k, joinLoc(loc, k+".[key]"), errs)
			s.S.validate(m[k], joinLoc(loc, k), errs)
		}
	case "dc":
		m, ok := v.(map[string]any)
		if !ok {
			fail("Input should be a dictionary")
			return
		}
		known := map[string]bool{}
		for _, f := range s.F {
			known[f.Name] = true
			val, given := m[f.Name]
			switch {
			case given:
				f.Schema.validate(val, joinLoc(loc, f.Name), errs)
			case f.Required:
				*errs = append(*errs, schemaError{loc: joinLoc(loc, f.Name), msg: "Missing required argument", val: m})
			}
		}
		if s.Forbid {
			for _, k := range sortedKeys(m) {
				if !known[k] {
					*errs = append(*errs, schemaError{loc: joinLoc(loc, k), msg: "Unexpected keyword argument", val: m[k]})
				}
			}
		}
	}
}

func joinLoc(loc, k string) string {
	if loc == "" {
		return k
	}
	return loc + "." + k
}

// bounds checks gt, ge, lt and le, in pydantic's order.
func (s *configSchema) bounds(x *big.Float) string {
	check := func(b *json.Number, ok func(c int) bool, what string) string {
		if b == nil {
			return ""
		}
		y, _, err := big.ParseFloat(b.String(), 10, 200, big.ToNearestEven)
		if err != nil || ok(x.Cmp(y)) {
			return ""
		}
		return "Input should be " + what + " " + b.String()
	}
	for _, c := range []struct {
		b    *json.Number
		ok   func(int) bool
		what string
	}{
		{s.Gt, func(c int) bool { return c > 0 }, "greater than"},
		{s.Ge, func(c int) bool { return c >= 0 }, "greater than or equal to"},
		{s.Lt, func(c int) bool { return c < 0 }, "less than"},
		{s.Le, func(c int) bool { return c <= 0 }, "less than or equal to"},
	} {
		if msg := check(c.b, c.ok, c.what); msg != "" {
			return msg
		}
	}
	return ""
}

// matches is a literal's or an enum's test: a string equals a string value; a number equals a
// numeric value (an int literal also takes true and false, Python's 1 and 0); null is None; an
// int or float enum reads its input as lax int or float first.
func (s *configSchema) matches(v any) bool {
	if s.T == "enum" && (s.Sub == "int" || s.Sub == "float") {
		var f float64
		if s.Sub == "int" {
			n, msg := laxInt(v)
			if msg != "" {
				return false
			}
			f, _ = new(big.Float).SetInt(n).Float64()
		} else {
			var msg string
			if f, msg = laxFloat(v); msg != "" {
				return false
			}
		}
		v = json.Number(fmt.Sprint(f))
	}
	for _, want := range s.V {
		switch w := want.(type) {
		case nil:
			if v == nil {
				return true
			}
		case string:
			if got, ok := v.(string); ok && got == w {
				return true
			}
		case bool:
			if got, ok := v.(bool); ok && got == w {
				return true
			}
		case json.Number:
			wf, err := w.Float64()
			if err != nil {
				continue
			}
			switch got := v.(type) {
			case json.Number:
				if gf, err := got.Float64(); err == nil && gf == wf {
					return true
				}
			case bool:
				if (got && wf == 1) || (!got && wf == 0) {
					return true
				}
			}
		}
	}
	return false
}

// orList is how pydantic lists expected values: 'a', 'b' or 'c'.
func orList(vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = expectedRepr(v)
	}
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// expectedRepr is Python's repr() of a literal's or an enum's value as the catalog holds it: a
// tuple is {"tuple": [...]} (flags.py _plain).
func expectedRepr(v any) string {
	switch w := v.(type) {
	case string:
		return pyRepr(w)
	case nil:
		return "None"
	case bool:
		return map[bool]string{true: "True", false: "False"}[w]
	case map[string]any:
		items, _ := w["tuple"].([]any)
		strs := make([]string, len(items))
		for i, it := range items {
			strs[i] = expectedRepr(it)
		}
		if len(strs) == 1 {
			return "(" + strs[0] + ",)"
		}
		return "(" + strings.Join(strs, ", ") + ")"
	}
	return fmt.Sprint(v)
}

// laxIntText is a string pydantic reads as an int: digits with underscores between them, and
// a fraction of zeros.
var laxIntText = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[+-]?[0-9]+(_[0-9]+)*(\.0+)?$`) })

// laxInt is pydantic's int in lax JSON mode: an integer, a float without a fractional part, a
// bool, or a string of one (underscores between digits, a trailing ".0" allowed).
func laxInt(v any) (*big.Int, string) {
	switch x := v.(type) {
	case bool:
		if x {
			return big.NewInt(1), ""
		}
		return big.NewInt(0), ""
	case json.Number:
		if n, ok := new(big.Int).SetString(x.String(), 10); ok {
			return n, ""
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return nil, "Input should be a finite number"
		}
		if f != math.Trunc(f) {
			return nil, "Input should be a valid integer, got a number with a fractional part"
		}
		n, _ := big.NewFloat(f).Int(nil)
		return n, ""
	case string:
		t := strings.TrimSpace(x)
		if !laxIntText().MatchString(t) {
			return nil, "Input should be a valid integer, unable to parse string as an integer"
		}
		t, _, _ = strings.Cut(strings.ReplaceAll(t, "_", ""), ".")
		n, _ := new(big.Int).SetString(strings.TrimPrefix(t, "+"), 10)
		return n, ""
	}
	return nil, "Input should be a valid integer"
}

// laxFloat is pydantic's float in lax JSON mode: a number, a bool, or a string Python's float()
// reads (pyFloat: infinities and NaN included).
func laxFloat(v any) (float64, string) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, ""
		}
		return 0, ""
	case json.Number:
		f, err := x.Float64()
		if err != nil && !math.IsInf(f, 0) {
			return 0, "Input should be a valid number"
		}
		return f, ""
	case string:
		f, err := pyFloat(x)
		if err != nil {
			return 0, "Input should be a valid number, unable to parse string as a number"
		}
		return f, ""
	}
	return 0, "Input should be a valid number"
}

// configError is argparse's error for a config pydantic refused (validationArgError).
func configError(spec *flagSpec, val string, errs []schemaError) error {
	return validationArgError(spec.display(), val, spec.opt.Class, schemaItems(errs))
}

// schemaItems are a ValidationError's lines for errs: "loc: message [input_value=...]".
func schemaItems(errs []schemaError) []string {
	items := make([]string, len(errs))
	for i, e := range errs {
		items[i] = e.msg + " [input_value=" + pydanticRepr(e.val) + "]"
		if e.loc != "" {
			items[i] = e.loc + ": " + items[i]
		}
	}
	return items
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// beforeResult is what a validator function that runs before a field's type made of a value: an
// enum member (valid as it is), a ValueError pydantic collects, another exception, which
// escapes, or another value (replaced), which goes on to the field's type; otherwise the value
// itself goes on.
type beforeResult struct {
	member     bool
	valueError string
	raise      error
	replaced   bool
	value      any
}

// beforeValidators are the validator functions of vLLM's config classes the model runs, by the
// qualified name the catalog gives them (flags.py _compact), each given the value and the
// field's type; a field whose function is not here takes any value.
var beforeValidators = map[string]func(v any, typ *configSchema) beforeResult{
	// vllm/config/attention.py: a backend given as text is "auto" (any case: None, automatic
	// selection) or AttentionBackendEnum[text.upper()], whose metaclass words a name it lacks as
	// a ValueError (vllm/v1/attention/backends/registry.py).
	"AttentionConfig.validate_backend_before": func(v any, typ *configSchema) beforeResult {
		if name, ok := v.(string); ok && strings.ToLower(name) == "auto" {
			return beforeResult{replaced: true, value: nil}
		}
		return enumByName(v, typ, "attention backend")
	},
	// vllm/config/attention.py: MLAPrefillBackendEnum[text.upper()]
	// (vllm/v1/attention/backends/mla/prefill/registry.py words a missing name).
	"AttentionConfig.validate_mla_prefill_backend_before": func(v any, typ *configSchema) beforeResult {
		return enumByName(v, typ, "MLA prefill backend")
	},
	// vllm/config/attention.py: entry by entry, a key must be a KVCacheSpecKind value and a text
	// value a backend by name as for backend (the first that is not is the ValueError).
	"AttentionConfig.validate_backend_per_kind_before": func(v any, typ *configSchema) beforeResult {
		m, ok := v.(map[string]any)
		if !ok || typ == nil || typ.T != "dict" {
			return beforeResult{}
		}
		out := make(map[string]any, len(m))
		for _, kind := range sortedKeys(m) {
			if !slices.Contains(kvCacheSpecKinds, kind) {
				kinds := slices.Sorted(slices.Values(kvCacheSpecKinds))
				return beforeResult{valueError: fmt.Sprintf("Unknown KV cache group kind '%s' in backend_per_kind. Valid kinds are: %s.", kind, strings.Join(kinds, ", "))}
			}
			r := enumByName(m[kind], typ.S, "attention backend")
			if r.valueError != "" {
				return r
			}
			out[kind] = m[kind]
			if r.member {
				out[kind] = enumMember{}
			}
		}
		return beforeResult{replaced: true, value: out}
	},
	// vllm/config/kernel.py: a backend given as text is lower-cased, "-" read as "_", before its
	// Literal.
	"KernelConfig._normalize_moe_backend":    normalizeBackend,
	"KernelConfig._normalize_linear_backend": normalizeBackend,
	// vllm/config/compilation.py: a mode given as a name is the member of that name (any case);
	// another name is a ValueError that lists them.
	"CompilationConfig.validate_mode_before": func(v any, _ *configSchema) beforeResult {
		name, ok := v.(string)
		if !ok {
			return beforeResult{}
		}
		if slices.Contains(compilationModes, strings.ToUpper(name)) {
			return beforeResult{member: true}
		}
		return beforeResult{valueError: fmt.Sprintf("Invalid compilation mode: %s. Valid modes are: %s", name, strings.Join(compilationModes, ", "))}
	},
	// vllm/config/compilation.py: a cudagraph_mode given as text is CUDAGraphMode[text.upper()],
	// whose KeyError for any other text is not a validation error.
	"CompilationConfig.validate_cudagraph_mode_before": func(v any, _ *configSchema) beforeResult {
		name, ok := v.(string)
		if !ok {
			return beforeResult{}
		}
		if _, ok := cudaGraphModes[strings.ToUpper(name)]; ok {
			return beforeResult{member: true}
		}
		return beforeResult{raise: &PyError{Type: "KeyError", Msg: pyRepr(strings.ToUpper(name))}}
	},
}

// enumMember is a value a validator function already made an enum member: valid as it is.
type enumMember struct{}

// enumByName is a validator's Enum[text.upper()] for a field whose type is that enum (or None):
// the member, or the ValueError "Unknown <what>: 'NAME'. Valid options are: ..." with which
// vLLM's enum metaclasses answer a name they lack. A value that is not text goes on to the
// type.
func enumByName(v any, typ *configSchema, what string) beforeResult {
	name, ok := v.(string)
	for typ != nil && typ.T == "nullable" {
		typ = typ.S
	}
	if !ok || typ == nil || typ.T != "enum" || len(typ.Names) == 0 {
		return beforeResult{} // (a catalog without the enum's names cannot tell)
	}
	name = strings.ToUpper(name)
	if slices.Contains(typ.Names, name) {
		return beforeResult{member: true}
	}
	return beforeResult{valueError: fmt.Sprintf("Unknown %s: '%s'. Valid options are: %s", what, name, strings.Join(typ.Names, ", "))}
}

// normalizeBackend is KernelConfig's normalisation of a backend given as text.
func normalizeBackend(v any, _ *configSchema) beforeResult {
	if s, ok := v.(string); ok {
		return beforeResult{replaced: true, value: strings.ReplaceAll(strings.ToLower(s), "-", "_")}
	}
	return beforeResult{}
}

// kvCacheSpecKinds are KVCacheSpecKind's values (vllm/v1/kv_cache_interface.py), which
// AttentionConfig.backend_per_kind's keys must be.
var kvCacheSpecKinds = []string{"full_attention", "mla_attention", "sliding_window", "sliding_window_mla", "mamba",
	"chunked_local_attention", "sink_full_attention", "encoder_only_attention", "cross_attention", "unknown"}

// ModelsValidator reports whether the model runs its own version of a config class's validator
// function, by the qualified name the catalog gives it (ServeOption.Schema's "before" schemas);
// a field whose function it does not run takes any value.
func ModelsValidator(qualname string) bool {
	_, ok := beforeValidators[qualname]
	return ok
}

// compilationModes are CompilationMode's member names (vllm/config/compilation.py), in order.
var compilationModes = []string{"NONE", "STOCK_TORCH_COMPILE", "DYNAMO_TRACE_ONCE", "VLLM_COMPILE"}

// cudaGraphMode is a CUDAGraphMode (vllm/config/compilation.py) by what matters here: whether
// its routine (the larger of a pair) captures full graphs, and whether it needs piecewise
// compilation.
type cudaGraphMode struct{ full, piecewise bool }

// cudaGraphModes are CUDAGraphMode's members by name; cudaGraphModeValues by the value JSON can
// give (0, 1, 2; the pairs have no JSON form).
var (
	cudaGraphModes = map[string]cudaGraphMode{
		"NONE": {}, "PIECEWISE": {piecewise: true}, "FULL": {full: true},
		"FULL_DECODE_ONLY": {full: true}, "FULL_AND_PIECEWISE": {full: true, piecewise: true},
	}
	cudaGraphModeValues = []string{"NONE", "PIECEWISE", "FULL"}
)
