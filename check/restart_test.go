package check_test

import (
	"strings"
	"testing"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

// TestIdentityChangedOnRestart: vLLM derives a process's DP identity from its command line alone
// (vllm/engine/arg_utils.py create_engine_config, vllm/config/parallel.py), so a restart with the
// same line must give it back; the engine_id is a fresh uuid4 per parse (vllm/config/kv_transfer.py)
// and is not compared.
func TestIdentityChangedOnRestart(t *testing.T) {
	w := report.Process{ID: "h/0/headless-0/worker-0", Role: report.RoleWorker, Host: "h", Replica: "r",
		DataParallelRank: 1, DataParallelIndex: 1, MooncakeDPIndex: report.Int(1), Rank: report.Int(8),
		TPRank: report.Int(8), PPRank: report.Int(0), EngineID: "a"}
	same := w
	before := report.IdentityOf(w)
	same.BeforeRestart, same.Restarts, same.EngineID = &before, 1, "b"
	if vs := check.Run([]report.Process{same}); len(vs) != 0 {
		t.Errorf("a restart with the same identity and a new engine_id: got %v", vs)
	}
	moved := same
	moved.ID = "h/0/headless-0/worker-1"
	moved.MooncakeDPIndex = nil
	moved.DataParallelIndex = 0
	dead := moved
	dead.ID = "h/0/headless-0/worker-2"
	dead.Exit = &report.Exit{Code: 1, Error: "AssertionError"}
	vs := check.Run([]report.Process{same, moved, dead})
	var got []report.Violation
	for _, v := range vs {
		if v.Kind == report.IdentityChangedOnRestart {
			got = append(got, v)
		}
	}
	if len(got) != 1 || got[0].Processes[0] != moved.ID ||
		!strings.Contains(got[0].Message, "data_parallel_index 1 -> 0, mooncake_dp_index 1 -> None") {
		t.Errorf("identity-changed-on-restart: got %+v, want one naming %s's index and Mooncake index", got, moved.ID)
	}
}

// TestStoreRegistrationLost: after a store fault a live worker must be mounted on the master and
// published on the metadata server, as Mooncake's client restores both on NEED_REMOUNT
// (mooncake-store/src/client_service.cpp after PR #2077).
func TestStoreRegistrationLost(t *testing.T) {
	mk := func(id string, r *report.Registration, exit *report.Exit) report.Process {
		return report.Process{ID: id, Role: report.RoleWorker, Host: "h", Segment: "h:" + id, Registration: r, Exit: exit}
	}
	procs := []report.Process{
		mk("a", &report.Registration{Mounted: true, Published: true, Remounts: 1}, nil),
		mk("b", &report.Registration{Mounted: true, Remounts: 1}, nil),
		mk("c", &report.Registration{}, nil),
		mk("d", nil, nil),
		mk("e", &report.Registration{}, &report.Exit{Signal: "SIGKILL", Expected: true, Code: -9}),
		mk("f", &report.Registration{}, &report.Exit{Code: 1, Error: "RuntimeError"}),
	}
	var got []string
	for _, v := range check.Run(procs) {
		if v.Kind == report.StoreRegistrationLost {
			got = append(got, v.Processes[0]+": "+v.Message)
		}
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "b: ") || !strings.Contains(got[0], "rpc_meta/ram keys are gone") ||
		strings.Contains(got[0], "not mounted") || !strings.HasPrefix(got[1], "c: ") || !strings.Contains(got[1], "not mounted on the master and") {
		t.Errorf("store-registration-lost: got %q, want b (keys gone) and c (both)", got)
	}
}
