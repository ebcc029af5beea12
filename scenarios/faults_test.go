package scenarios_test

import (
	"strings"
	"testing"

	"github.com/widetp/widetp/scenarios"
)

// twoNodes is a head and a headless follower of one wide-TP replica (internal LB), so a timeline
// has hosts and processes on both sides to name.
const twoNodes = `name: t
description: one replica of TP 16 over two nodes
profile: main
model: {name: deepseek-ai/DeepSeek-V3}
nodes:
  - host: head
    command: vllm serve deepseek-ai/DeepSeek-V3 -tp 16 --nnodes 2 --node-rank 0 --master-addr head
  - host: follower
    command: vllm serve deepseek-ai/DeepSeek-V3 -tp 16 --nnodes 2 --node-rank 1 --master-addr head --headless
`

func TestFaultsTimeline(t *testing.T) {
	src := twoNodes + `faults:
  - name: cut
    after: settled
    partition: {hosts: [follower], from: [head]}
  - heal: cut
  - after: {event: ready, host: follower, process: follower/0/headless-0}
    restart: follower/0/headless-0
  - pause: head
  - resume: head
  - store-restart: {}
  - store-wipe:
  - store-fault: kind=latency,plane=metadata,latency=200ms,count=3
  - after: {step: cut}
    restart: [follower, head]
  - steal-port: {process: head/0/api-server-0, channel: api-server}
`
	s, err := scenarios.Parse("x.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	for _, st := range s.Faults {
		got = append(got, st.Name+": "+st.Describe()+" after "+st.After.String())
	}
	want := []string{
		"cut: partition follower from head after settled",
		"step-1: heal cut after step cut",
		"step-2: restart follower/0/headless-0 after event ready of follower/0/headless-0",
		"step-3: pause head after step step-2",
		"step-4: resume head after step step-3",
		"step-5: store-restart after step step-4",
		"step-6: store-wipe after step step-5",
		"step-7: store-fault latency after step step-6",
		"step-8: restart follower,head after step cut",
		"step-9: steal-port api-server of head/0/api-server-0 after start, when the process learns the address",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("timeline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !scenarios.IsProcess(s.Faults[2].Targets[0]) || scenarios.IsProcess(s.Faults[8].Targets[0]) {
		t.Errorf("a target with a slash is a process, a host name a node: got %q, %q", s.Faults[2].Targets, s.Faults[8].Targets)
	}
	if f := s.Faults[7].StoreFault; f == nil || f.Count != 3 || f.Plane != "metadata" {
		t.Errorf("store-fault parsed as %+v", f)
	}
}

func TestFaultsErrors(t *testing.T) {
	for _, tc := range []struct{ steps, want string }{
		{"  - kill: nobody\n", `x.yaml:11: faults[0].kill: "nobody" is not a host of this scenario (hosts: follower, head)`},
		{"  - kill: head/0/engine-core-7\n", `x.yaml:11: faults[0].kill: "head/0/engine-core-7" is not a process this deployment starts`},
		{"  - pause: head/0/api-server-0\n", `x.yaml:11: faults[0].pause: "head/0/api-server-0": pause acts on a node`},
		{"  - resume: head\n", `x.yaml:11: faults[0].resume: head: not paused by an earlier step`},
		{"  - restart: head/0/api-server-0/engine-core-0\n", `is not a process this deployment starts`},
		{"  - restart: follower/0/headless-0/worker-0\n", `faults[0].restart: "follower/0/headless-0/worker-0" is not the top process of a command`},
		{"  - kill: [head, nobody]\n", `faults[0].kill: "nobody" is not a host`},
		{"  - heal: cut\n", `x.yaml:11: faults[0].heal: "cut" is not an earlier step`},
		{"  - name: p\n    pause: head\n  - heal: p\n", `x.yaml:13: faults[1].heal: "p" is a pause step, not a partition`},
		{"  - kill: head\n    restart: head\n", `x.yaml:12: faults[0]: one action per step, got kill and restart`},
		{"  - after: settled\n", `x.yaml:11: faults[0]: no action: give one of kill, restart`},
		{"  - explode: head\n", `x.yaml:11: faults[0].explode: unknown field`},
		{"  - kill: head\n    after: {step: later}\n  - name: later\n    kill: follower\n", `x.yaml:12: faults[0].after.step: "later" is not an earlier step`},
		{"  - kill: head\n    after: {event: booted}\n", `x.yaml:12: faults[0].after.event: "booted" is not an event (known: ready, exited`},
		{"  - kill: head\n    after: {event: ready, host: head, process: follower/0/headless-0}\n", `faults[0].after.process: "follower/0/headless-0" does not run on host "head"`},
		{"  - kill: head\n    after: {event: expired, host: follower}\n", `x.yaml:12: faults[0].after.event: no process of host "follower" registers a Mooncake segment (only the workers of a MooncakeStoreConnector do), so the store's "expired" event never comes`},
		{"  - kill: head\n    after: {event: registered}\n", `faults[0].after.event: no process of this deployment registers a Mooncake segment`},
		{"  - kill: head\n    after: {event: remounted, process: follower/0/headless-0/worker-3}\n", `faults[0].after.event: "follower/0/headless-0/worker-3" registers no Mooncake segment`},
		{"  - kill: follower\n  - kill: follower/0/headless-0/worker-0\n", `x.yaml:12: faults[1].kill: "follower/0/headless-0/worker-0": host follower is down since step step-0 killed it, and nothing runs there until a restart of the host`},
		{"  - name: down\n    kill: [head, follower]\n  - pause: follower\n", `faults[1].pause: "follower": host follower is down since step down killed it`},
		{"  - kill: follower\n  - kill: follower\n", `faults[1].kill: "follower": host follower is down since step step-0`},
		{"  - kill: follower\n  - restart: follower/0/headless-0\n", `faults[1].restart: "follower/0/headless-0": host follower is down`},
		{"  - kill: follower\n  - restart: follower\n  - kill: head\n  - kill: [follower, head]\n", `faults[3].kill: "head": host head is down since step step-2`},
		{"  - kill: head\n    after: soon\n", `x.yaml:12: faults[0].after: "soon": want settled`},
		{"  - partition: {hosts: [head], from: [head]}\n", `faults[0].partition.from: "head" is on both sides`},
		{"  - partition: {hosts: [head]}\n", `faults[0].partition.from: required`},
		{"  - store-restart: {down: 2s}\n", `faults[0].store-restart: takes no settings`},
		{"  - store-fault: kind=latency\n", `faults[0].store-fault: fault latency: latency must be > 0`},
		{"  - store-fault: kind=restart\n", `faults[0].store-fault: use the store-restart action`},
		{"  - steal-port: {process: head/0/api-server-0, channel: torch-world}\n", `faults[0].steal-port.channel: head/0/api-server-0 binds no "torch-world" address (it binds: api-server`},
		{"  - steal-port: {channel: api-server}\n", `faults[0].steal-port.process: required`},
		{"  - steal-port: {process: head/0/api-server-0, channel: api-server}\n    after: settled\n", `x.yaml:12: faults[0].after: a steal-port takes no trigger`},
		{"  - name: a\n    kill: head\n  - name: a\n    kill: follower\n", `x.yaml:13: faults[1].name: "a" is already the name of faults[0]`},
		{"  - name: Big\n    kill: head\n", `faults[0].name: "Big" must match`},
	} {
		_, err := scenarios.Parse("x.yaml", []byte(twoNodes+"faults:\n"+tc.steps))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("steps\n%s: got error %v\nwant it to contain %q", tc.steps, err, tc.want)
		}
	}
	// A killed host comes back with a restart of the host; then anything may act on it again.
	if _, err := scenarios.Parse("x.yaml", []byte(twoNodes+"faults:\n  - kill: follower\n  - restart: follower\n  - kill: follower/0/headless-0/worker-0\n  - pause: follower\n  - resume: follower\n")); err != nil {
		t.Errorf("a host restarted after its kill: %v", err)
	}
	// With the Mooncake store connector the follower's workers register segments: the same
	// triggers wait for events that come.
	kv := strings.ReplaceAll(twoNodes, "--master-addr head", `--master-addr head --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`)
	for _, steps := range []string{"  - kill: head\n    after: {event: expired, host: follower}\n", "  - kill: head\n    after: {event: registered}\n",
		"  - kill: head\n    after: {event: remounted, process: follower/0/headless-0/worker-3}\n"} {
		if _, err := scenarios.Parse("x.yaml", []byte(kv+"faults:\n"+steps)); err != nil {
			t.Errorf("steps\n%s with the Mooncake store connector: %v", steps, err)
		}
	}
	if _, err := scenarios.Parse("x.yaml", []byte(twoNodes+"faults: []\n")); err == nil || !strings.Contains(err.Error(), "faults: is empty") {
		t.Errorf("an empty timeline: got %v", err)
	}
}
