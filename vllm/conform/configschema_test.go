package conform_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/widetp/widetp/vllm"
)

// Every field of every config dataclass option (vllm/engine/arg_utils.py parse_dataclass), given
// values of each JSON type and the text forms pydantic's lax mode reads, through vLLM's parser and
// the model's: the model must never refuse what vLLM accepts, must refuse what breaks a type or a
// bound the catalog's schema of the class describes, and where both refuse, print vLLM's error
// line (the count of pydantic's errors and the class). What a class's validator functions or
// __post_init__ refuse (a value_error, or a field the schema leaves to a function) is not
// modelled: such lines are counted, not failed.
func TestConfigFieldValuesAgainstVLLMsParser(t *testing.T) {
	pl := planner(t)
	values := []any{0, -1, 1, 1.5, "x", "1", "1.0", " 2 ", "yes", true, nil, []any{}, []any{1}, map[string]any{}}
	var lines []string
	// opaque: the line's field is (in part) checked by a function the catalog's schema cannot
	// describe, or its class has no schema the model checks.
	opaque := map[string]bool{}
	for _, o := range vllm.ServeOptions() {
		if o.Type != "dataclass" {
			continue
		}
		fieldSchemas := map[string]string{}
		var schema struct {
			T string `json:"t"`
			F []struct {
				N string          `json:"n"`
				S json.RawMessage `json:"s"`
			} `json:"f"`
		}
		if err := json.Unmarshal([]byte(o.Schema), &schema); err != nil {
			t.Fatalf("%s: schema: %v", o.Names[0], err)
		}
		for _, f := range schema.F {
			fieldSchemas[f.N] = string(f.S)
		}
		for _, f := range o.Fields {
			fs, ok := fieldSchemas[f]
			isOpaque := schema.T != "dc" || !ok || strings.Contains(fs, `"t":"any"`) || unmodelledValidator(fs)
			for _, v := range values {
				b, err := json.Marshal(map[string]any{f: v})
				if err != nil {
					t.Fatal(err)
				}
				line := "vllm serve org/M " + o.Names[0] + " '" + string(b) + "'"
				lines = append(lines, line)
				opaque[line] = isOpaque
			}
		}
	}
	res := parseWithVLLM(t, pl, lines)
	agreed, unmodelled := 0, 0
	for i, line := range lines {
		v := res[i]
		gExit, gMsg, gRaised := goParse(line)
		vRefused := v.Exit != nil && *v.Exit == 2
		switch {
		case gRaised != "" && gRaised != v.Raised:
			t.Errorf("%s: vLLM raised %q, the model %q", line, v.Raised, gRaised)
		case v.Raised != "" && gRaised == "" && opaque[line]:
			// A validator function that lets another exception than ValueError escape (a
			// KeyError from an enum lookup): the parser itself crashes.
			unmodelled++
		case v.Raised != "" && gRaised == "":
			t.Errorf("%s: vLLM raised %q, the model parses it", line, v.Raised)
		case gExit != nil && !vRefused:
			t.Errorf("%s\n  vLLM accepts it; the model: %s", line, gMsg)
		case vRefused && gExit == nil && (opaque[line] || strings.Contains(v.Message, "type=value_error")):
			unmodelled++
		case vRefused && gExit == nil:
			t.Errorf("%s\n  vLLM refuses a type or a bound the catalog's schema describes: %s\n  model: parses", line, v.Message)
		case vRefused:
			first, _, _ := strings.Cut(v.Message, "\n")
			if gMsg != first && !strings.HasPrefix(gMsg, first+": ") {
				t.Errorf("%s\n  vLLM:  %s\n  model: %s", line, first, gMsg)
				continue
			}
			agreed++
		default:
			agreed++
		}
	}
	t.Logf("%d lines: %d alike, %d refused (or crashed on) by a validator function or __post_init__ the model does not run", len(lines), agreed, unmodelled)
}

// unmodelledValidator is whether a field's schema names a validator function the model does not
// run (vllm.ModelsValidator): the field then takes any value in the model.
func unmodelledValidator(fieldSchema string) bool {
	for _, m := range validatorName().FindAllStringSubmatch(fieldSchema, -1) {
		if !vllm.ModelsValidator(m[1]) {
			return true
		}
	}
	return false
}

var validatorName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"fn":"([^"]+)"`) })
