package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

// proc is a bare record with addresses.
func proc(id, host string, as ...report.Address) report.Process {
	return report.Process{ID: id, Host: host, Role: report.RoleEngineCore, Addresses: as}
}

func bind(channel, ep, key string, seq int) report.Address {
	return report.Address{Channel: channel, Role: report.AddressBind, Endpoint: ep, Key: key, Exercised: true, BindSeq: seq}
}

func open(ep, key, creator string, seq int) report.Address {
	return report.Address{Channel: "offload-region", Role: report.AddressOpen, Endpoint: ep, Key: key, Exercised: true, BindSeq: seq, ServedBy: creator}
}

func dial(ep, key, servedBy, nonce, errText string) report.Address {
	return report.Address{Channel: "nixl-side-channel", Role: report.AddressConnect, Endpoint: ep, Key: key, Exercised: true,
		ServedBy: servedBy, Nonce: nonce, Error: errText}
}

// TestAddressChecks: the address kinds, each from the evidence a record can carry.
func TestAddressChecks(t *testing.T) {
	inUse := "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:7778')"
	failed := bind("offload-p2p-control", "tcp://127.0.0.1:7778", "e_dp1", 0)
	failed.Error = inUse
	crashed := func(p report.Process) report.Process { p.Exit = &report.Exit{Code: 1, Error: "X"}; return p }
	ready := func(p report.Process) report.Process { p.Ready = true; return p }
	tests := []struct {
		name, source string
		procs        []report.Process
		want         map[report.Kind][]string // kind -> the processes of its violations, joined
	}{
		{"a TCP bind refused with EADDRINUSE is a collision with whoever holds the port on that host",
			"vllm/v1/kv_offload/tiering/p2p/manager.py before PR #47636: every DP engine binds the tier's port",
			[]report.Process{
				proc("h/1/engine-core-0", "h", bind("offload-p2p-control", "tcp://127.0.0.1:7778", "e_dp0", 3)),
				proc("h/1/engine-core-1", "h", failed),
				proc("g/1/engine-core-0", "g", bind("offload-p2p-control", "tcp://127.0.0.1:7778", "other", 1)),
			},
			map[report.Kind][]string{report.AddressCollision: {"h/1/engine-core-0 h/1/engine-core-1"}}},
		{"binds of one port on different interfaces of one host do not collide, the wildcard collides with all",
			"Linux bind(2): a specific address and the wildcard share a port's listeners",
			[]report.Process{
				proc("h/0/a", "h", bind("x", "tcp://127.0.0.1:5600", "a", 1)),
				proc("h/0/b", "h", bind("x", "tcp://h:5600", "b", 2)),
			},
			nil},
		{"two live binders of one ipc path: the later takes it over",
			"libzmq: a second ipc bind unlinks and rebinds the path",
			[]report.Process{
				proc("h/0/a", "h", bind("x", "ipc:///tmp/p", "a", 1)),
				proc("h/1/b", "h", bind("x", "ipc:///tmp//p", "b", 2)),
				proc("h/2/c", "h", bind("x", "ipc:///tmp/other", "c", 3)),
			},
			map[report.Kind][]string{report.AddressCollision: {"h/0/a h/1/b"}}},
		{"an ipc binder that crashed holds nothing",
			"a dead process's socket is gone",
			[]report.Process{
				crashed(proc("h/0/a", "h", bind("x", "ipc:///tmp/p", "a", 1))),
				proc("h/1/b", "h", bind("x", "ipc:///tmp/p", "b", 2)),
			},
			nil},
		{"one shared file opened for two owners: collision, and the opener that got another's is misrouted",
			"vllm/v1/kv_offload/tiering/spec.py before PR #47987: /dev/shm/vllm_offload_{instance_id}.mmap per front end",
			[]report.Process{
				proc("h/1/engine-core-0/worker-0", "h", open("shm:///dev/shm/r.mmap", "e_dp0", "h/1/engine-core-0/worker-0", 1)),
				proc("h/1/engine-core-0", "h", open("shm:///dev/shm/r.mmap", "e_dp0", "h/1/engine-core-0/worker-0", 2)),
				crashed(proc("h/1/engine-core-1/worker-0", "h", open("shm:///dev/shm/r.mmap", "e_dp1", "h/1/engine-core-0/worker-0", 3))),
				// Planned but never opened: no evidence.
				proc("h/1/engine-core-1", "h", report.Address{Channel: "offload-region", Role: report.AddressOpen, Endpoint: "shm:///dev/shm/r.mmap", Key: "e_dp1", Exercised: true}),
			},
			map[report.Kind][]string{
				report.AddressCollision: {"h/1/engine-core-0 h/1/engine-core-0/worker-0 h/1/engine-core-1/worker-0"},
				report.AddressMisrouted: {"h/1/engine-core-0/worker-0 h/1/engine-core-1/worker-0"},
			}},
		{"a dial answered by a server with another key is misrouted; by its own, fine",
			"nixl/base_worker.py _nixl_handshake checks the answering engine_id (Remote NIXL agent engine ID mismatch)",
			[]report.Process{
				proc("p/0/engine-core-0", "p", bind("nixl-side-channel", "tcp://p:5600", "P", 1)),
				proc("q/0/engine-core-0", "q", bind("nixl-side-channel", "tcp://localhost:5600", "Q", 1)),
				proc("d/0/w0", "d", dial("tcp://p:5600", "P", "p/0/engine-core-0", "n0", "")),
				proc("d/0/w1", "d", dial("tcp://localhost:5600", "P", "q/0/engine-core-0", "n1", "")),
			},
			map[report.Kind][]string{report.AddressMisrouted: {"d/0/w1 q/0/engine-core-0"}}},
		{"a dial answered by a process without a record, or with nobody claiming the nonce, is misrouted",
			"an answer nothing accounts for shows nothing reached the right server",
			[]report.Process{
				proc("d/0/w0", "d", dial("tcp://p:5600", "P", "p/0/gone", "n0", "")),
				proc("d/0/w1", "d", dial("tcp://p:5600", "P", "", "n1", "")),
			},
			map[report.Kind][]string{report.AddressMisrouted: {"d/0/w0 p/0/gone", "d/0/w1"}}},
		{"a dial that got no answer is unreachable, as is a ready process that never reported one",
			"nixl_connector.py before PR #26338: ranks dial remote_host:remote_port + rank, where nothing listens",
			[]report.Process{
				proc("d/0/w0", "d", dial("tcp://p:5608", "P", "", "n0", "no answer at tcp://p:5608 within 2s")),
				ready(proc("d/0/w1", "d", dial("tcp://p:5609", "P", "", "", ""))),
				// Not ready and untried: it never got there (something else is wrong with it).
				proc("d/0/w2", "d", dial("tcp://p:5610", "P", "", "", "")),
			},
			map[report.Kind][]string{report.AddressUnreachable: {"d/0/w0", "d/0/w1"}}},
		{"a process with a step that never returned is hung",
			"vllm/utils/network_utils.py get_open_port before PR #50965",
			[]report.Process{{ID: "h/0/engine-core-0", Host: "h", Role: report.RoleEngineCore,
				Hung: &report.Hang{Where: "get_open_port (vllm/utils/network_utils.py)", Deadline: "2s", Detail: "keeps returning 29500"}}},
			map[report.Kind][]string{report.ProcessHung: {"h/0/engine-core-0"}}},
		{"listed addresses are never judged",
			"a run binds them with port 0 or meets there through the rendezvous layer",
			[]report.Process{
				proc("h/0/a", "h", report.Address{Channel: "dp-coordinator", Role: report.AddressBind, Endpoint: "ipc:///tmp/x"}),
				proc("h/1/b", "h", report.Address{Channel: "dp-coordinator", Role: report.AddressBind, Endpoint: "ipc:///tmp/x"}),
				ready(proc("h/2/c", "h", report.Address{Channel: "dp-handshake", Role: report.AddressConnect, Endpoint: "tcp://h:1"})),
			},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("source: %s", tt.source)
			got := map[report.Kind][]string{}
			for _, v := range check.Run(tt.procs) {
				if !strings.HasPrefix(v.Message, string(v.Kind)+": ") {
					t.Errorf("message %q does not start with its kind", v.Message)
				}
				got[v.Kind] = append(got[v.Kind], strings.Join(v.Processes, " "))
			}
			for k, w := range tt.want {
				if !slices.Equal(got[k], w) {
					t.Errorf("%s: got %q, want %q", k, got[k], w)
				}
			}
			for k, g := range got {
				if _, ok := tt.want[k]; !ok && k != report.ProcessCrashed {
					t.Errorf("unexpected %s: %q", k, g)
				}
			}
		})
	}
}
