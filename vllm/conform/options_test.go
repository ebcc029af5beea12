package conform_test

import (
	"context"
	"strings"
	"testing"

	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/conform"
)

// fixedOptions lists the serve options it holds, and the catalog's for grpc_server unless grpc
// is set.
type fixedOptions struct{ serve, grpc []vllm.ServeOption }

func (f fixedOptions) EntrypointFlags(_ context.Context, entry string) ([]vllm.ServeOption, error) {
	switch {
	case entry == vllm.EntrypointServe:
		return f.serve, nil
	case f.grpc != nil:
		return f.grpc, nil
	}
	return vllm.EntrypointOptions(entry), nil
}

// Options reports each option only one side has, or that the two describe differently, and
// nothing when the vLLM under test has the catalog's options.
func TestOptionsReportsWhatDiffers(t *testing.T) {
	var c conform.Counts
	same, err := conform.Options(context.Background(), fixedOptions{serve: vllm.ServeOptions()}, &c)
	if err != nil || len(same) != 0 {
		t.Fatalf("the catalog against itself: %v, %v", same, err)
	}
	if want := len(vllm.ServeOptions()) + len(vllm.EntrypointOptions(vllm.EntrypointGRPCServer)); c.Options != want {
		t.Errorf("counted %d options, want %d", c.Options, want)
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
	ds, err := conform.Options(context.Background(), fixedOptions{serve: changed}, &conform.Counts{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Scenario != "(vllm serve options)" {
			t.Errorf("%s: scenario %q, want the serve parser's", d.Field, d.Scenario)
		}
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

// grpc_server's parser is compared on its own: an option it lacks is its row, not serve's.
func TestOptionsComparesTheGRPCServersParser(t *testing.T) {
	grpc := vllm.EntrypointOptions(vllm.EntrypointGRPCServer)
	ds, err := conform.Options(context.Background(), fixedOptions{serve: vllm.ServeOptions(), grpc: grpc[1:]}, &conform.Counts{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Scenario != "(grpc_server options)" || ds[0].Field != "option "+grpc[0].Names[0] || ds[0].VLLM != "-" {
		t.Errorf("disagreements %+v, want one grpc_server row for %s", ds, grpc[0].Names[0])
	}
}
