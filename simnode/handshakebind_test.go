package simnode_test

import (
	"slices"
	"testing"
	"time"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
	"github.com/widetp/widetp/vllm"
)

// TestCoLocatedFrontEndsOnOneHandshake: two rank-0 front ends on one host serve the DP handshake
// at one address (a:13345); a headless host brings DP rank 1's engine. vLLM's front end binds its
// handshake before it starts its engines (vllm/v1/engine/utils.py launch_core_engines), so the
// second command's front end raises pyzmq's ZMQError at once and never starts its engine, while
// the first one's barrier completes with its own engine and the headless one: one crash, no failed
// rendezvous — the same every run, as the model predicts.
func TestCoLocatedFrontEndsOnOneHandshake(t *testing.T) {
	const frontEnd = "vllm serve org/dense -dp 2 -dpl 1 --data-parallel-address a --data-parallel-rpc-port 13345"
	hosts := []host{
		{name: "a", ip: "127.0.0.24", commands: []string{
			"CUDA_VISIBLE_DEVICES=0 " + frontEnd + " --port 8000",
			"CUDA_VISIBLE_DEVICES=1 " + frontEnd + " --port 8001",
		}},
		{name: "b", ip: "127.0.0.25", commands: []string{
			"vllm serve org/dense -dp 2 -dpl 1 --data-parallel-start-rank 1 --headless --data-parallel-address a --data-parallel-rpc-port 13345",
		}},
	}
	// Short bounds: a barrier the run leaves waiting shows up in seconds, as a rendezvous-failed.
	o := deployment{profile: "main", model: vllm.Model{Name: "org/dense"}, gpus: 2, hosts: hosts, timeouts: simnode.Timeouts{
		Rendezvous: simnode.Duration(2 * time.Second), Lookup: simnode.Duration(time.Second), Store: simnode.Duration(5 * time.Second)}}.run(t)
	o.agreesWithPrediction(t)

	obs := records(o.observed)
	if got := kinds(obs); !slices.Equal(got, []report.Kind{report.ProcessCrashed}) {
		t.Errorf("violation kinds %v, want only %s", got, report.ProcessCrashed)
	}
	second := o.observed["a/1/api-server-0"]
	if want := vllm.ZMQBindError("a:13345", vllm.AddressInUse); second.Exit == nil || second.Exit.Error != want || second.Exit.Code != 1 {
		t.Errorf("second front end exit %+v, want code 1 and %q", second.Exit, want)
	}
	if len(second.Rendezvous) != 0 {
		t.Errorf("second front end recorded a rendezvous: %+v", second.Rendezvous)
	}
	for _, r := range obs {
		if r.Parent == "a/1/api-server-0" {
			t.Errorf("%s started under the front end whose bind failed", r.ID)
		}
		if r.ID != "a/1/api-server-0" && (r.Exit != nil || !r.Ready) {
			t.Errorf("%s: exit %+v, ready %v; want it up", r.ID, r.Exit, r.Ready)
		}
		for _, rv := range r.Rendezvous {
			if rv.Error != "" {
				t.Errorf("%s: rendezvous %s failed: %s", r.ID, rv.Address, rv.Error)
			}
		}
	}
	first := o.observed["a/0/api-server-0"]
	if len(first.Rendezvous) != 1 || first.Rendezvous[0].Address != "a:13345" || first.Rendezvous[0].Error != "" {
		t.Errorf("first front end's handshake: %+v", first.Rendezvous)
	}
}
