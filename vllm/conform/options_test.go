package conform_test

import (
	"context"
	"strings"
	"testing"

	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/conform"
)

type fixedOptions []vllm.ServeOption

func (f fixedOptions) Flags(context.Context) ([]vllm.ServeOption, error) { return f, nil }

// Options reports each option only one side has, or that the two describe differently, and
// nothing when the vLLM under test has the catalog's options.
func TestOptionsReportsWhatDiffers(t *testing.T) {
	var c conform.Counts
	same, err := conform.Options(context.Background(), fixedOptions(vllm.ServeOptions()), &c)
	if err != nil || len(same) != 0 {
		t.Fatalf("the catalog against itself: %v, %v", same, err)
	}
	if c.Options != len(vllm.ServeOptions()) {
		t.Errorf("counted %d options, want %d", c.Options, len(vllm.ServeOptions()))
	}
	var changed []vllm.ServeOption
	var dropped, retyped string
	for _, o := range vllm.ServeOptions() {
		switch {
		case dropped == "" && o.Action == "bool":
			dropped = o.Names[0] // vLLM removed it
			continue
		case retyped == "" && o.Type == "int":
			retyped = o.Names[0]
			o.Type = "float"
		}
		changed = append(changed, o)
	}
	changed = append(changed, vllm.ServeOption{Names: []string{"--widetp-new-option"}, Action: "store", Type: "string"})
	ds, err := conform.Options(context.Background(), fixedOptions(changed), &conform.Counts{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"option " + dropped: true, "option " + retyped: true, "option --widetp-new-option": true}
	for _, d := range ds {
		if !want[d.Field] || d.Area != "options" {
			t.Errorf("unexpected disagreement %+v", d)
		}
		delete(want, d.Field)
		if d.Field == "option "+dropped && d.VLLM != "-" || d.Field == "option --widetp-new-option" && d.Model != "-" {
			t.Errorf("%s: vllm %q, model %q: the missing side must be -", d.Field, d.VLLM, d.Model)
		}
		if d.Field == "option "+retyped && !strings.Contains(d.VLLM, "float") {
			t.Errorf("%s: vllm side %q does not show its type", d.Field, d.VLLM)
		}
	}
	for f := range want {
		t.Errorf("no disagreement for %s", f)
	}
}
