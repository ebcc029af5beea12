package simnode_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// TestRefusedHandshake: the recipe vLLM#47692 broke, one DP rank a host: the head passes
// --data-parallel-start-rank 0, which makes it external LB since the fix, and its follower stays
// --headless. The head's front end refuses the follower's engine when its HELLO arrives
// (vllm/v1/engine/utils.py wait_for_engine_startup) and exits with that RuntimeError, stopping its
// own engine; the follower's engine hears nothing more and gives up; neither engine gets as far as
// its workers (vllm/v1/engine/core.py: handshakes before the executor).
func TestRefusedHandshake(t *testing.T) {
	cmd := func(start int, extra string) string {
		return fmt.Sprintf("vllm serve org/moe -dp 2 -dpl 1 --data-parallel-start-rank %d --data-parallel-address lead --data-parallel-rpc-port 13345 %s %s", start, extra, kvStore)
	}
	o := deployment{profile: "main", model: moe, gpus: 1, hosts: []host{
		{name: "lead", ip: "127.0.0.5", commands: []string{cmd(0, "")}},
		{name: "follow", ip: "127.0.0.6", commands: []string{cmd(1, "--headless")}},
	}}.run(t)
	o.agreesWithPrediction(t)
	byID := map[string]report.Process{}
	for _, r := range records(o.observed) {
		byID[r.ID] = r
	}
	const why = "RuntimeError: Remote engine 1 must not use --headless in external or hybrid dp lb mode"
	if api := byID["lead/0/api-server-0"]; api.Exit == nil || api.Exit.Error != why || len(api.Rendezvous) != 1 || api.Rendezvous[0].Error != why {
		t.Errorf("front end: exit %+v rendezvous %+v, want %q", api.Exit, api.Rendezvous, why)
	}
	if e := byID["lead/0/engine-core-0"]; e.Exit == nil || e.Crashed() {
		t.Errorf("the front end's own engine: exit %+v, want stopped with it", e.Exit)
	}
	if e := byID["follow/0/engine-core-1"]; e.Exit == nil || e.Exit.Error != vllm.HandshakeNoAnswer {
		t.Errorf("refused engine: exit %+v rendezvous %+v", e.Exit, e.Rendezvous)
	}
	if h := byID["follow/0/headless-0"]; h.Exit == nil || h.Crashed() {
		t.Errorf("headless launcher: exit %+v, want a clean stop", h.Exit)
	}
	for id := range byID {
		if strings.Contains(id, "/worker-") {
			t.Errorf("%s started, but no engine got past its handshake", id)
		}
	}
}
