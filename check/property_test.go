package check_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

// Records arrive in whatever order processes reported; the verdict must not depend on it, and the
// checks must not touch the records they read (the harness writes them to the report afterwards).
func TestRunIgnoresOrderAndKeepsRecords(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		procs := wideTP(rapid.IntRange(1, 3).Draw(t, "replicas"), rapid.IntRange(1, 3).Draw(t, "nodes"), rapid.IntRange(1, 3).Draw(t, "gpus"))
		for i := range procs {
			switch rapid.IntRange(0, 9).Draw(t, "perturb") {
			case 0:
				procs[i].Exit = &report.Exit{Code: 1, Error: "AssertionError"}
			case 1:
				procs[i].MooncakeDPIndex = report.Int(rapid.IntRange(0, 3).Draw(t, "index"))
			case 2:
				procs[i].EngineID = rapid.SampledFrom([]string{"", "eid-0_dp0", "x"}).Draw(t, "engine_id")
			case 3:
				procs[i].Segment = "r0-head:12300"
			}
		}
		before, err := json.Marshal(procs)
		if err != nil {
			t.Fatal(err)
		}
		want := check.Run(procs)
		after, _ := json.Marshal(procs)
		if string(before) != string(after) {
			t.Fatalf("Run modified its input")
		}
		perm := rapid.Permutation(procs).Draw(t, "order")
		if got := check.Run(perm); !reflect.DeepEqual(got, want) {
			t.Fatalf("Run depends on record order:\n got %v\nwant %v", got, want)
		}
	})
}
