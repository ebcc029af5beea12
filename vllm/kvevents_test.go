package vllm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

// TestOffsetEndpointPort: ZmqEventPublisher.offset_endpoint_port (vllm/distributed/kv_events.py),
// case by case; every expectation here was printed by that function of vLLM main (455edc0).
func TestOffsetEndpointPort(t *testing.T) {
	tests := []struct {
		endpoint string
		index    int
		want     string
		err      string
	}{
		{"tcp://*:5557", 0, "tcp://*:5557", ""},
		{"tcp://*:5557", 2, "tcp://*:5559", ""},
		{"tcp://[::]:5557", 2, "tcp://[::]:5559", ""},
		{"tcp://*: 5557", 1, "tcp://*:5558", ""}, // int() strips blanks
		{"tcp://10.0.0.1:7000", 3, "tcp://10.0.0.1:7003", ""},
		{"inproc://cache", 2, "inproc://cache_dp2", ""},
		{"ipc:///tmp/x", 0, "ipc:///tmp/x", ""},
		{"", 5, "", ""},
		{"ipc:///tmp/x", 1, "", "ValueError: Invalid endpoint: must contain 'inproc' or 'tcp'"},
		{"tcp://h:abc", 1, "", "ValueError: invalid literal for int() with base 10: 'abc'"},
		// The last colon is the scheme's: the "port" is everything after it.
		{"tcp://h", 3, "", "ValueError: invalid literal for int() with base 10: '//h'"},
		{"ipc:///tmp/tcpx", 1, "", "ValueError: invalid literal for int() with base 10: '///tmp/tcpx'"},
	}
	for _, tt := range tests {
		got, err := offsetEndpointPort(tt.endpoint, tt.index, false)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if got != tt.want || gotErr != tt.err {
			t.Errorf("offset_endpoint_port(%q, %d) = %q, %q; want %q, %q", tt.endpoint, tt.index, got, gotErr, tt.want, tt.err)
		}
	}
}

// TestKVEventsConfigValidation: --kv-events-config goes through EngineArgs' parse_dataclass
// (vllm/engine/arg_utils.py: human-readable numbers expanded, then pydantic's lax JSON validation
// of vllm/config/kv_events.py KVEventsConfig, extra keys forbidden, __post_init__ choosing the
// publisher); optional_type reads "" and "None" as no config.
func TestKVEventsConfigValidation(t *testing.T) {
	valid := []struct {
		flags string
		want  *KVEventsConfig
	}{
		{`--kv-events-config '{"enable_kv_cache_events": true}'`, &KVEventsConfig{Enabled: true, Publisher: "zmq", Endpoint: "tcp://*:5557"}},
		{`--kv-events-config '{"publisher": "zmq"}'`, &KVEventsConfig{Publisher: "zmq", Endpoint: "tcp://*:5557"}},
		{`--kv-events-config '{}'`, &KVEventsConfig{Publisher: "null", Endpoint: "tcp://*:5557"}},
		{`--kv-events-config '{"enable_kv_cache_events": "Yes", "hwm": 1k, "buffer_steps": "1_000", "max_queue_size": 2.0}'`, &KVEventsConfig{Enabled: true, Publisher: "zmq", Endpoint: "tcp://*:5557"}},
		{`--kv-events-config '{"enable_kv_cache_events": 1, "endpoint": "ipc:///tmp/ev", "replay_endpoint": null}'`, &KVEventsConfig{Enabled: true, Publisher: "zmq", Endpoint: "ipc:///tmp/ev"}},
		{`--kv-events-config.enable_kv_cache_events true --kv-events-config.endpoint tcp://*:6000`, &KVEventsConfig{Enabled: true, Publisher: "zmq", Endpoint: "tcp://*:6000"}},
		{`--kv-events-config '{"enable_kv_cache_events": true}' --kv-events-config None`, nil},
		{`--kv-events-config ''`, nil},
	}
	for _, tt := range valid {
		a, err := ParseServe("vllm serve org/M " + tt.flags)
		if err != nil {
			t.Errorf("%s: %v", tt.flags, err)
			continue
		}
		if fmt.Sprint(a.KVEvents) != fmt.Sprint(tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.flags, a.KVEvents, tt.want)
		}
	}
	replay := "tcp://*:5600"
	if a, err := ParseServe(`vllm serve org/M --kv-events-config '{"enable_kv_cache_events": true, "replay_endpoint": "tcp://*:5600"}'`); err != nil || a.KVEvents.ReplayEndpoint == nil || *a.KVEvents.ReplayEndpoint != replay {
		t.Errorf("replay endpoint: %+v, %v", a, err)
	}
	invalid := []struct{ flags, want string }{
		{`--kv-events-config '{"publisher": "foo"}'`, "1 validation error for KVEventsConfig: publisher: Input should be 'null' or 'zmq' [input_value='foo']"},
		{`--kv-events-config '{"publisher": null}'`, "publisher: Input should be 'null' or 'zmq' [input_value=None]"},
		{`--kv-events-config '{"foo": 1}'`, "foo: Unexpected keyword argument [input_value=1]"},
		{`--kv-events-config '{"endpoint": 5}'`, "endpoint: Input should be a valid string [input_value=5]"},
		{`--kv-events-config '{"enable_kv_cache_events": 2}'`, "Input should be a valid boolean, unable to interpret input"},
		{`--kv-events-config '{"enable_kv_cache_events": null}'`, "enable_kv_cache_events: Input should be a valid boolean [input_value=None]"},
		{`--kv-events-config '{"hwm": "1k"}'`, "hwm: Input should be a valid integer, unable to parse string as an integer"},
		{`--kv-events-config '{"buffer_steps": 1.5}'`, "buffer_steps: Input should be a valid integer, got a number with a fractional part"},
		{`--kv-events-config '{"topic": null}'`, "topic: Input should be a valid string"},
		// Field errors in declaration order, then the unexpected keys.
		{`--kv-events-config '{"endpoint": "tcp://*:5557", "foo": 1, "publisher": "x"}'`, "2 validation errors for KVEventsConfig: publisher: Input should be 'null' or 'zmq' [input_value='x']; foo: Unexpected keyword argument [input_value=1]"},
		// Each occurrence is validated, even one a later one replaces.
		{`--kv-events-config '{"publisher": "foo"}' --kv-events-config '{}'`, "publisher: Input should be 'null' or 'zmq'"},
		{`--kv-events-config '[]'`, "invalid JSON: expected an object"},
	}
	for _, tt := range invalid {
		_, err := ParseServe("vllm serve org/M " + tt.flags)
		var ae *ArgError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "argument --kv-events-config") {
			t.Errorf("%s: %v; want an argparse error of --kv-events-config with %q", tt.flags, err, tt.want)
		}
	}
}

// TestExpandHumanNumbers: arg_utils._expand_json_human_readable_numbers rewrites bare numbers
// with a k/m/g/t or K/M/G/T suffix outside JSON strings and leaves strings alone.
func TestExpandHumanNumbers(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": 1k, "b": 2K, "c": 1.5m}`:        `{"a": 1000, "b": 2048, "c": 1500000}`,
		`{"a": "1k", "b": "x \" 3k", "c": 3k}`: `{"a": "1k", "b": "x \" 3k", "c": 3000}`,
		`{"a": 1.5K}`:                          `{"a": 1.5K}`, // human_readable_int refuses it; so does the JSON decoder
		`{"a": 12}`:                            `{"a": 12}`,
	} {
		if got := expandHumanNumbers(in); got != want {
			t.Errorf("expandHumanNumbers(%s) = %s, want %s", in, got, want)
		}
	}
	if _, err := ParseServe(`vllm serve org/M -cc '{"max_cudagraph_capture_size": 1k}'`); err != nil {
		t.Errorf("a parse_dataclass flag takes a human-readable number: %v", err)
	}
	if _, err := ParseServe(`vllm serve org/M --hf-overrides '{"max_position_embeddings": 1k}'`); err == nil {
		t.Errorf("--hf-overrides is json.loads: a bare 1k is invalid JSON there")
	}
}

// TestKVEventPublishers: each engine core's scheduler builds its publisher right after its KV
// connector (vllm/v1/core/sched/scheduler.py Scheduler.__init__:
// EventPublisherFactory.create(kv_events_config, parallel_config.data_parallel_index)), and
// ZmqEventPublisher (vllm/distributed/kv_events.py) binds or connects its PUB socket at the
// endpoint offset by that index, then binds the replay ROUTER.
func TestKVEventPublishers(t *testing.T) {
	const on = `--kv-events-config '{"enable_kv_cache_events": true}'`
	publishers := func(t *testing.T, procs []report.Process) map[string][]string {
		out := map[string][]string{}
		for _, p := range procs {
			for _, a := range addrOf(p, "kv-events", "") {
				out[p.ID] = append(out[p.ID], fmt.Sprintf("%s %s %s exercised=%t", a.Role, a.Endpoint, a.Key, a.Exercised))
			}
		}
		return out
	}
	t.Run("one host, DP 4: the engines publish on 5557 + their DP index", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", "vllm serve org/M -dp 4 "+on))
		got := publishers(t, procs)
		if len(got) != 4 {
			t.Fatalf("publishers %v", got)
		}
		for i := 0; i < 4; i++ {
			id := fmt.Sprintf("h/0/engine-core-%d", i)
			want := []string{fmt.Sprintf("bind tcp://*:%d publisher dp%d exercised=true", 5557+i, i)}
			if !slices.Equal(got[id], want) {
				t.Errorf("%s: %v, want %v", id, got[id], want)
			}
		}
		if v := kinds(procs); len(v) != 0 {
			t.Errorf("violations %v", v)
		}
	})
	t.Run("hybrid LB over two hosts: a node's engines offset by their global index, the replay socket too", func(t *testing.T) {
		ev := `--kv-events-config '{"enable_kv_cache_events": true, "replay_endpoint": "tcp://*:5600"}'`
		procs := predict(t, true, "main",
			node("a", "vllm serve org/M -tp 4 -dp 4 -dpl 2 --data-parallel-hybrid-lb --data-parallel-address a "+ev),
			node("b", "vllm serve org/M -tp 4 -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-hybrid-lb --data-parallel-address a "+ev))
		got := publishers(t, procs)
		want := []string{"bind tcp://*:5560 publisher dp3 exercised=true", "bind tcp://*:5603 replay dp3 exercised=true"}
		if !slices.Equal(got["b/0/engine-core-3"], want) {
			t.Errorf("node b's second engine: %v, want %v", got["b/0/engine-core-3"], want)
		}
		for id := range got {
			if !strings.Contains(id, "engine-core") {
				t.Errorf("%s publishes: only schedulers do", id)
			}
		}
	})
	t.Run("Ray data parallelism: each DPEngineCoreActor's scheduler publishes at its DP rank", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", "vllm serve org/M -dp 2 --data-parallel-backend ray "+on))
		got := publishers(t, procs)
		if !slices.Equal(got["h/0/ray-actor-1"], []string{"bind tcp://*:5558 publisher dp1 exercised=true"}) || len(got) != 2 {
			t.Errorf("publishers %v", got)
		}
	})
	t.Run("a wide-TP replica: the head's engine core publishes, the headless follower does not", func(t *testing.T) {
		procs := predict(t, true, "main",
			node("h", "vllm serve org/M -tp 16 --nnodes 2 --node-rank 0 --master-addr h "+on),
			node("f", "vllm serve org/M -tp 16 --nnodes 2 --node-rank 1 --master-addr h --headless "+on))
		got := publishers(t, procs)
		if len(got) != 1 || !slices.Equal(got["h/0/engine-core-0"], []string{"bind tcp://*:5557 publisher dp0 exercised=true"}) {
			t.Errorf("publishers %v", got)
		}
	})
	t.Run("a prefill and a decode instance on one host: the later engine core cannot bind 5557", func(t *testing.T) {
		procs := predict(t, false, "main", node("h",
			"CUDA_VISIBLE_DEVICES=0,1 vllm serve org/M -tp 2 --port 8100 "+on,
			"CUDA_VISIBLE_DEVICES=2,3 vllm serve org/M -tp 2 --port 8200 "+on))
		ec := get(t, procs, "h/1/engine-core-0")
		if ec.Exit == nil || ec.Exit.Error != "zmq.error.ZMQError: Address already in use (addr='tcp://*:5557')" {
			t.Errorf("later engine core: %s", exitText(ec))
		}
		if first := get(t, procs, "h/0/engine-core-0"); first.Exit != nil {
			t.Errorf("first engine core: %s", exitText(first))
		}
		if v := kinds(procs); !slices.Equal(v, []report.Kind{report.AddressCollision, report.ProcessCrashed}) {
			t.Errorf("violations %v", v)
		}
	})
	t.Run("a non-wildcard tcp endpoint is connected to, an inproc one is process-local: neither is bound for real", func(t *testing.T) {
		procs := predict(t, true, "main",
			node("h", `vllm serve org/M -dp 2 --kv-events-config '{"enable_kv_cache_events": true, "endpoint": "tcp://localhost:5557"}'`),
			node("g", `vllm serve org/M -dp 2 --kv-events-config '{"enable_kv_cache_events": true, "endpoint": "inproc://ev"}'`))
		got := publishers(t, procs)
		for id, want := range map[string]string{
			"h/0/engine-core-1": "connect tcp://localhost:5558 publisher dp1 exercised=false",
			"g/0/engine-core-1": "bind inproc://ev_dp1 publisher dp1 exercised=false",
		} {
			if !slices.Equal(got[id], []string{want}) {
				t.Errorf("%s: %v, want %s", id, got[id], want)
			}
		}
	})
	t.Run("an ipc endpoint with DP > 1: engine 0 binds the path, engine 1 raises before binding anything", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", `vllm serve org/M -dp 2 --kv-events-config '{"enable_kv_cache_events": true, "endpoint": "ipc:///tmp/ev"}'`))
		got := publishers(t, procs)
		if !slices.Equal(got["h/0/engine-core-0"], []string{"bind ipc:///tmp/ev publisher dp0 exercised=true"}) || len(got["h/0/engine-core-1"]) != 0 {
			t.Errorf("publishers %v", got)
		}
		if ec := get(t, procs, "h/0/engine-core-1"); ec.Exit == nil || ec.Exit.Error != "ValueError: Invalid endpoint: must contain 'inproc' or 'tcp'" {
			t.Errorf("engine 1: %s", exitText(ec))
		}
	})
	t.Run("port 0: offset past index 0 before PR #55844; since, every engine binds its node's address at a port the kernel picks", func(t *testing.T) {
		line := `vllm serve org/M -dp 2 --kv-events-config '{"enable_kv_cache_events": true, "endpoint": "tcp://*:0"}'`
		old := publishers(t, predict(t, true, "main+kv_events_port_zero=offset", node("h", line)))
		if !slices.Equal(old["h/0/engine-core-1"], []string{"bind tcp://*:1 publisher dp1 exercised=true"}) {
			t.Errorf("before #55844, engine 1: %v", old["h/0/engine-core-1"])
		}
		now := publishers(t, predict(t, true, "main", Node{Host: "h", GPUs: 8, Env: map[string]string{"VLLM_HOST_IP": "10.0.0.7"}, Commands: []string{line}}))
		for i := 0; i < 2; i++ {
			id := fmt.Sprintf("h/0/engine-core-%d", i)
			if want := []string{fmt.Sprintf("bind tcp://10.0.0.7:0 publisher dp%d exercised=false", i)}; !slices.Equal(now[id], want) {
				t.Errorf("since #55844, %s: %v, want %v", id, now[id], want)
			}
		}
	})
	t.Run("no publisher: events off, the null publisher, or a scheduler connector that failed first", func(t *testing.T) {
		hashless := `--kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":1,"secondary_tiers":[{"type":"p2p"}]}}'`
		procs := predict(t, false, "main",
			node("a", `vllm serve org/M --kv-events-config '{"publisher": "zmq"}'`),
			node("b", `vllm serve org/M --kv-events-config '{"enable_kv_cache_events": true, "publisher": "null"}'`),
			node("c", "vllm serve org/M "+on+" "+hashless))
		if got := publishers(t, procs); len(got) != 0 {
			t.Errorf("publishers %v", got)
		}
		if ec := get(t, procs, "c/0/engine-core-0"); ec.Exit == nil || !strings.Contains(ec.Exit.Error, "PYTHONHASHSEED") {
			t.Errorf("c's engine core: %s", exitText(ec))
		}
	})
}

// kinds are the violation kinds the checks find in procs, sorted.
func kinds(procs []report.Process) []report.Kind {
	return report.KindSet(check.Run(procs))
}
