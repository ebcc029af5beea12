package report

import "testing"

func TestLookupEndpointKey(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		// VLLM_RPC_BASE_PATH=/tmp/ gives ipc:///tmp//lookup_... (store/scheduler.py get_zmq_rpc_path_lookup
		// formats f"ipc://{base_url}/lookup_..."), the same file as ipc:///tmp/lookup_....
		{"ipc:///tmp//lookup_rpc_port_0_host_h_dp_rank0", "ipc:///tmp/lookup_rpc_port_0_host_h_dp_rank0", true},
		{"ipc:///tmp/./x/../lookup", "ipc:///tmp/lookup", true},
		{"ipc:///tmp/lookup_rpc_port_0_host_h_dp_rank0", "ipc:///tmp/lookup_rpc_port_0_host_h_dp_rank1", false},
		{"tcp://h:1", "tcp://h:1", true},
		{"ipc://", "ipc://", true},
	}
	for _, tt := range tests {
		if got := LookupEndpointKey(tt.a) == LookupEndpointKey(tt.b); got != tt.same {
			t.Errorf("LookupEndpointKey(%q) == LookupEndpointKey(%q) is %v, want %v", tt.a, tt.b, got, tt.same)
		}
	}
}
