package vllm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// TestMooncakeRows encodes spec §5 (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/):
// the DP engine index each process computes under each profile, who crashes computing it, and
// where the lookup clients land.
func TestMooncakeRows(t *testing.T) {
	coLocatedExternal := []Node{node("h",
		"vllm serve org/M -dp 2 --data-parallel-rank 0 --port 8000 "+store,
		"vllm serve org/M -dp 2 --data-parallel-rank 1 --port 8001 "+store)}
	coLocatedHybrid := []Node{node("h",
		"vllm serve org/M -dp 4 -dpl 2 -dph --port 8000 "+store,
		"vllm serve org/M -dp 4 -dpl 2 --data-parallel-start-rank 2 --port 8100 "+store)}
	e2 := wideTP(func(k int) string { return fmt.Sprintf("--data-parallel-rank %d", k/2) })
	e3 := wideTP(func(k int) string {
		// Every node names its replica's first rank, the head of replica 0 too: since PR #47692
		// its start rank 0 makes it external LB like replica 1's head, so rank 0's front end
		// accepts replica 1's non-headless engine (vllm/v1/engine/utils.py wait_for_engine_startup).
		return fmt.Sprintf("--data-parallel-start-rank %d", k/2)
	})
	rows := []struct {
		name, source, profile string
		// dense: the row also holds for a dense model (whose engines reconfigure to DP 1 but keep
		// data_parallel_index and data_parallel_rank_local).
		dense bool
		nodes []Node
		// index maps a process ID to the Mooncake DP index it must hold (-1: nil, it crashed).
		index map[string]int
		// crash maps a process ID to the start of the error it must exit with.
		crash map[string]string
		// servedBy maps a client engine core to the server that answers it.
		servedBy map[string]string
	}{
		{
			name: "(c) co-located external LB, legacy: every engine uses index 0, the later binder captures both clients", profile: "pre-48061",
			source: "mooncake_utils.py get_mooncake_dp_engine_index (before PR #48061); store/worker.py LookupKeyServer",
			nodes:  coLocatedExternal,
			index:  map[string]int{"h/0/engine-core-0": 0, "h/1/engine-core-1": 0, "h/1/engine-core-1/worker-0": 0},
			servedBy: map[string]string{
				"h/0/engine-core-0": "h/1/engine-core-1/worker-0",
				"h/1/engine-core-1": "h/1/engine-core-1/worker-0",
			},
		},
		{
			name: "(c) co-located external LB, main: data_parallel_index keeps the paths apart", profile: "main",
			source: "mooncake_utils.py get_mooncake_dp_engine_index (after PR #48061)",
			nodes:  coLocatedExternal,
			index:  map[string]int{"h/0/engine-core-0": 0, "h/1/engine-core-1": 1, "h/1/engine-core-1/worker-0": 1},
			servedBy: map[string]string{
				"h/0/engine-core-0": "h/0/engine-core-0/worker-0",
				"h/1/engine-core-1": "h/1/engine-core-1/worker-0",
			},
		},
		{
			name: "(d) hybrid LB on one host, legacy: index j instead of S+j collides", profile: "pre-48061", dense: true,
			source: "mooncake_utils.py get_mooncake_dp_engine_index (before PR #48061)",
			nodes:  coLocatedHybrid,
			index:  map[string]int{"h/0/engine-core-1": 1, "h/1/engine-core-3": 1, "h/1/engine-core-2/worker-0": 0},
			servedBy: map[string]string{
				"h/0/engine-core-0": "h/1/engine-core-2/worker-0",
				"h/0/engine-core-1": "h/1/engine-core-3/worker-0",
			},
		},
		{
			name: "(d) hybrid LB on one host, main: index S+j", profile: "main", dense: true,
			source: "mooncake_utils.py get_mooncake_dp_engine_index (after PR #48061)",
			nodes:  coLocatedHybrid,
			index:  map[string]int{"h/1/engine-core-3": 3, "h/1/engine-core-2/worker-0": 2},
			servedBy: map[string]string{
				"h/0/engine-core-0": "h/0/engine-core-0/worker-0",
				"h/1/engine-core-3": "h/1/engine-core-3/worker-0",
			},
		},
		{
			name: "(e2) wide-TP external LB, legacy: followers assert, head of replica 1 uses 0", profile: "pre-48061",
			source: "mooncake_utils.py get_mooncake_dp_engine_index (before PR #48061); serve.py run_headless",
			nodes:  e2,
			index:  map[string]int{"h2/0/engine-core-1": 0, "h2/0/engine-core-1/worker-7": 0, "h3/0/headless-0/worker-0": -1},
			crash: map[string]string{
				"h1/0/headless-0/worker-3": "AssertionError",
				"h3/0/headless-0/worker-0": "AssertionError",
				"h3/0/headless-0":          "Exception: WorkerProc initialization failed",
			},
			servedBy: map[string]string{"h2/0/engine-core-1": "h2/0/engine-core-1/worker-0"},
		},
		{
			name: "(e2) wide-TP external LB, main: every process of replica N uses N", profile: "main",
			source: "mooncake_utils.py get_mooncake_dp_engine_index (after PR #48061)",
			nodes:  e2,
			index:  map[string]int{"h2/0/engine-core-1": 1, "h2/0/engine-core-1/worker-7": 1, "h3/0/headless-0/worker-0": 1, "h1/0/headless-0/worker-0": 0},
		},
		{
			name: "(e3) wide-TP auto-switched head, legacy: head 0, followers S", profile: "pre-48061",
			source: "mooncake_utils.py get_mooncake_dp_engine_index (before PR #48061); arg_utils.py create_engine_config",
			nodes:  e3,
			index:  map[string]int{"h2/0/engine-core-1": 0, "h2/0/engine-core-1/worker-0": 0, "h3/0/headless-0/worker-0": 1},
		},
		{
			name: "(e3) wide-TP auto-switched head, main: S everywhere", profile: "main",
			source: "mooncake_utils.py get_mooncake_dp_engine_index (after PR #48061)",
			nodes:  e3,
			index:  map[string]int{"h2/0/engine-core-1": 1, "h2/0/engine-core-1/worker-0": 1, "h3/0/headless-0/worker-0": 1},
		},
		{
			name: "(a) internal LB is not local_engines_only: both profiles use data_parallel_index", profile: "pre-48061", dense: true,
			source: "mooncake_utils.py get_mooncake_dp_engine_index",
			nodes:  []Node{node("h", "vllm serve org/M -dp 2 "+store)},
			index:  map[string]int{"h/0/engine-core-1": 1, "h/0/engine-core-1/worker-0": 1},
			servedBy: map[string]string{
				"h/0/engine-core-0": "h/0/engine-core-0/worker-0",
				"h/0/engine-core-1": "h/0/engine-core-1/worker-0",
			},
		},
	}
	for _, row := range rows {
		kinds := []bool{true}
		if row.dense {
			kinds = append(kinds, false)
		}
		for _, moe := range kinds {
			t.Run(fmt.Sprintf("%s/moe=%v", row.name, moe), func(t *testing.T) {
				t.Logf("source: %s", row.source)
				checkMooncakeRow(t, predict(t, moe, row.profile, row.nodes...), row.index, row.crash, row.servedBy)
			})
		}
	}
}

func checkMooncakeRow(t *testing.T, procs []report.Process, index map[string]int, crash, servedBy map[string]string) {
	t.Helper()
	for id, want := range index {
		p := get(t, procs, id)
		switch {
		case want < 0 && p.MooncakeDPIndex != nil:
			t.Errorf("%s: mooncake index %d, want None", id, *p.MooncakeDPIndex)
		case want >= 0 && (p.MooncakeDPIndex == nil || *p.MooncakeDPIndex != want):
			t.Errorf("%s: mooncake index %s, want %d", id, optStr(p.MooncakeDPIndex), want)
		}
	}
	for id, want := range crash {
		p := get(t, procs, id)
		if p.Exit == nil || !strings.HasPrefix(p.Exit.Error, want) {
			t.Errorf("%s: %s, want an exit with %q", id, exitText(p), want)
		}
	}
	for id, want := range servedBy {
		p := get(t, procs, id)
		if p.Lookup == nil || p.Lookup.ServedBy != want {
			t.Errorf("%s: lookup %+v, want served by %s", id, p.Lookup, want)
		}
	}
	if len(crash) == 0 {
		for _, p := range procs {
			if p.Crashed() {
				t.Errorf("%s crashed: %s", p.ID, exitText(p))
			}
		}
	}
}

// TestLookupPathAndBinder: get_zmq_rpc_path_lookup's format, where each part comes from, and that
// only the worker with parallel_config.rank == 0 binds (store/worker.py MooncakeStoreWorker).
func TestLookupPathAndBinder(t *testing.T) {
	tests := []struct {
		name, env, extra, want string
	}{
		{"defaults: tempfile.gettempdir() and port 0", "", `{}`, "ipc:///tmp/lookup_rpc_port_0_host_h_dp_rank1"},
		{"VLLM_RPC_BASE_PATH and lookup_rpc_port", "VLLM_RPC_BASE_PATH=/run/v", `{"lookup_rpc_port":7}`, "ipc:///run/v/lookup_rpc_port_7_host_h_dp_rank1"},
		{"TMPDIR moves gettempdir()", "TMPDIR=/scratch/", `{}`, "ipc:///scratch/lookup_rpc_port_0_host_h_dp_rank1"},
		{"a float port prints as Python does", "", `{"lookup_rpc_port":5.0}`, "ipc:///tmp/lookup_rpc_port_5.0_host_h_dp_rank1"},
		{"a string port is used verbatim", "", `{"lookup_rpc_port":"x"}`, "ipc:///tmp/lookup_rpc_port_x_host_h_dp_rank1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := fmt.Sprintf(`--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":%s}'`, tt.extra)
			procs := predict(t, true, "main", node("h", strings.TrimSpace(tt.env+" vllm serve org/M -dp 2 -tp 2 "+kv)))
			client := get(t, procs, "h/0/engine-core-1")
			if client.LookupPath != tt.want || client.LookupRole != report.LookupClient {
				t.Errorf("client path %q role %q, want %q", client.LookupPath, client.LookupRole, tt.want)
			}
			server := get(t, procs, "h/0/engine-core-1/worker-0")
			if server.LookupPath != tt.want || server.LookupRole != report.LookupServer || server.BindSeq == 0 {
				t.Errorf("server path %q role %q seq %d", server.LookupPath, server.LookupRole, server.BindSeq)
			}
			other := get(t, procs, "h/0/engine-core-1/worker-1")
			if other.LookupPath != "" || other.LookupRole != "" || other.MooncakeDPIndex == nil || other.Segment == "" {
				t.Errorf("rank 1 worker: path %q role %q index %s segment %q", other.LookupPath, other.LookupRole, optStr(other.MooncakeDPIndex), other.Segment)
			}
		})
	}
}

// TestNoConnectorNoMooncakeIdentity: only processes that run the Mooncake store connector get a
// DP engine index, a lookup path or a segment; any kv-transfer-config gives an engine_id to the
// processes that build a connector (engine cores and workers), never to the API server
// (report.Process.EngineID).
func TestNoConnectorNoMooncakeIdentity(t *testing.T) {
	for _, kv := range []string{"", `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`} {
		procs := predict(t, true, "main", node("h", "vllm serve org/M -dp 2 "+kv))
		for _, p := range procs {
			if p.MooncakeDPIndex != nil || p.LookupPath != "" || p.Segment != "" || p.BindSeq != 0 || p.Lookup != nil {
				b, _ := json.Marshal(p)
				t.Errorf("kv %q: %s has Mooncake identity: %s", kv, p.ID, b)
			}
			builds := p.Role == report.RoleEngineCore || p.Role == report.RoleWorker
			if (kv != "" && builds) != (p.EngineID != "") {
				t.Errorf("kv %q: %s engine_id %q", kv, p.ID, p.EngineID)
			}
		}
	}
}

// TestSegments: every live worker registers one segment under get_ip() (VLLM_HOST_IP) or the
// MOONCAKE_REQUESTER_LOCAL_HOSTNAME override; the predicted names are unique per host.
func TestSegments(t *testing.T) {
	procs := predict(t, true, "main",
		node("a", "vllm serve org/M -dp 2 -tp 2 "+store),
		Node{Host: "b", GPUs: 8, Env: map[string]string{"MOONCAKE_REQUESTER_LOCAL_HOSTNAME": " seg-b "}, Commands: []string{"vllm serve org/M -tp 2 " + store}},
		Node{Host: "c", GPUs: 8, Env: map[string]string{"VLLM_HOST_IP": "10.0.0.3"}, Commands: []string{"vllm serve org/M " + store}},
	)
	seen := map[string]string{}
	for _, p := range procs {
		if p.Role != report.RoleWorker {
			continue
		}
		if prev, dup := seen[p.Segment]; dup {
			t.Errorf("segment %s held by %s and %s", p.Segment, prev, p.ID)
		}
		seen[p.Segment] = p.ID
		wantHost := map[string]string{"a": "a", "b": "seg-b", "c": "10.0.0.3"}[p.Host]
		if !strings.HasPrefix(p.Segment, wantHost+":") {
			t.Errorf("%s: segment %q, want host %s", p.ID, p.Segment, wantHost)
		}
	}
	if len(seen) != 4+2+1 {
		t.Errorf("%d segments, want 7", len(seen))
	}
}
