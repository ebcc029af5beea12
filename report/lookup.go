package report

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
