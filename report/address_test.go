package report

import "testing"

func TestSameSocket(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		// Linux bind(2): one port, overlapping interfaces.
		{"tcp://0.0.0.0:7777", "tcp://127.0.0.1:7777", true},
		{"tcp://127.0.0.1:7777", "tcp://localhost:7777", true},
		{"tcp://h:7777", "tcp://*:7777", true},
		{"tcp://127.0.0.1:7777", "tcp://h:7777", false},
		{"tcp://h:7777", "tcp://h:7778", false},
		// Port 0: the kernel picks a free port, nothing to collide on.
		{"tcp://h:0", "tcp://h:0", false},
		// One file, two spellings (a VLLM_RPC_BASE_PATH with a trailing slash).
		{"ipc:///tmp//x", "ipc:///tmp/x", true},
		{"shm:///dev/shm/a.mmap", "shm:///dev/shm/b.mmap", false},
		{"ipc:///tmp/x", "shm:///tmp/x", false},
		{"nonsense", "nonsense", false},
	}
	for _, tt := range tests {
		if got := SameSocket(tt.a, tt.b); got != tt.same {
			t.Errorf("SameSocket(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.same)
		}
	}
}

func TestResolveAddresses(t *testing.T) {
	procs := []Process{
		{ID: "s", Addresses: []Address{{Role: AddressBind, Served: []string{"n1"}}}},
		{ID: "c", Addresses: []Address{
			{Role: AddressConnect, Nonce: "n1"},
			{Role: AddressConnect, Nonce: "n2"},
			{Role: AddressConnect, Nonce: "n1", Error: "no answer"},
		}},
	}
	ResolveAddresses(procs)
	got := procs[1].Addresses
	if got[0].ServedBy != "s" || got[1].ServedBy != "" || got[2].ServedBy != "" {
		t.Errorf("resolved %+v", got)
	}
	if !got[0].Answered() || !got[1].Answered() || got[2].Answered() {
		t.Errorf("answered: %v %v %v", got[0].Answered(), got[1].Answered(), got[2].Answered())
	}
}
