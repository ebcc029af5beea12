package report

import (
	"path"
	"strings"
)

// ResolveLookups fills Lookup.ServedBy of every client whose request nonce a server lists in Served,
// on the same host (ipc paths are host-local). Predictions set ServedBy directly; live runs need the
// join because the lookup reply (a u32 hit count, vLLM's wire format) cannot name the server.
func ResolveLookups(procs []Process) {
	type key struct{ host, nonce string }
	server := map[key]string{}
	for _, p := range procs {
		for _, n := range p.Served {
			server[key{p.Host, n}] = p.ID
		}
	}
	for i := range procs {
		l := procs[i].Lookup
		if l == nil || l.ServedBy != "" || l.Nonce == "" {
			continue
		}
		if id, ok := server[key{procs[i].Host, l.Nonce}]; ok {
			l.ServedBy = id
		}
	}
}

// LookupEndpointKey names the socket a lookup endpoint reaches on its host. An ipc:// endpoint is
// a file, so it is keyed by the cleaned path: "ipc:///tmp//lookup_..." (VLLM_RPC_BASE_PATH with a
// trailing slash) and "ipc:///tmp/lookup_..." bind one socket file, and the later binder takes it
// over as libzmq does. Any other endpoint is its own key.
func LookupEndpointKey(endpoint string) string {
	p, ok := strings.CutPrefix(endpoint, "ipc://")
	if !ok || p == "" {
		return endpoint
	}
	return "ipc://" + path.Clean(p)
}
