package lookup

import (
	"strings"
	"testing"
)

func TestEndpoint(t *testing.T) {
	cases := []struct {
		name, path, root, endpoint, errHas string
	}{
		// vLLM's get_zmq_rpc_path_lookup (mooncake/store/worker.py) builds
		// ipc://{VLLM_RPC_BASE_PATH}/lookup_rpc_port_{P}_host_{hostname}_dp_rank{IDX}.
		{name: "container keeps the path", path: "ipc:///tmp/lookup_rpc_port_0_host_h_dp_rank0",
			endpoint: "ipc:///tmp/lookup_rpc_port_0_host_h_dp_rank0"},
		{name: "local run moves it under the root", path: "ipc:///tmp/lookup_rpc_port_0_host_h_dp_rank1", root: "/run/x",
			endpoint: "ipc:///run/x/tmp/lookup_rpc_port_0_host_h_dp_rank1"},
		{name: "not ipc", path: "tcp://127.0.0.1:5555", errHas: "not an ipc:// path"},
		{name: "relative", path: "ipc://tmp/x", errHas: "not absolute"},
		{name: "too long for a unix socket", path: "ipc:///tmp/" + strings.Repeat("x", 120), errHas: "over the 107"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep, _, err := Endpoint(tc.path, tc.root)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("Endpoint(%q, %q) = %q, %v; want error %q", tc.path, tc.root, ep, err, tc.errHas)
				}
				return
			}
			if err != nil || ep != tc.endpoint {
				t.Fatalf("Endpoint(%q, %q) = %q, %v; want %q", tc.path, tc.root, ep, err, tc.endpoint)
			}
		})
	}
}
