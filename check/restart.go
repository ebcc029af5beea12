package check

import (
	"fmt"
	"strings"

	"github.com/widetp/widetp/report"
)

// identityChangedOnRestart reports every live process that a fault step restarted and that came
// back with another identity than it had. vLLM derives each of these fields from the command
// line alone (vllm/engine/arg_utils.py create_engine_config, vllm/config/parallel.py
// ParallelConfig, the Mooncake connector's mooncake_utils.py), so the same command line must
// give them back; the KV engine_id is not compared (vllm/config/kv_transfer.py draws a uuid4
// per parse unless the config sets engine_id).
func identityChangedOnRestart(procs []report.Process) []report.Violation {
	var out []report.Violation
	for _, p := range procs {
		if p.BeforeRestart == nil || p.Exit != nil {
			continue
		}
		diff := p.BeforeRestart.Diff(report.IdentityOf(p))
		if len(diff) == 0 {
			continue
		}
		out = append(out, report.Violation{
			Kind: report.IdentityChangedOnRestart,
			Message: fmt.Sprintf("%s: %s (%s on %s) came back from %d restart(s) as another process: %s",
				report.IdentityChangedOnRestart, p.ID, p.Role, p.Host, p.Restarts, strings.Join(diff, ", ")),
			Processes: []string{p.ID},
		})
	}
	return out
}

// storeRegistrationLost reports every live worker whose Mooncake registration the store no
// longer holds after a store fault: its segment unmounted, or its rpc_meta/ram keys gone from the
// metadata server, where peers look it up (Mooncake's client re-mounts and re-publishes on the
// NEED_REMOUNT a restarted master answers: mooncake-store/src/client_service.cpp, PR #2077).
func storeRegistrationLost(procs []report.Process) []report.Violation {
	var out []report.Violation
	for _, p := range procs {
		r := p.Registration
		if r == nil || p.Exit != nil || p.Segment == "" || (r.Mounted && r.Published) {
			continue
		}
		var lost []string
		if !r.Mounted {
			lost = append(lost, "its segment is not mounted on the master")
		}
		if !r.Published {
			lost = append(lost, "its rpc_meta/ram keys are gone from the metadata server")
		}
		out = append(out, report.Violation{
			Kind: report.StoreRegistrationLost,
			Message: fmt.Sprintf("%s: %s (segment %s on %s, %d remount(s)): %s",
				report.StoreRegistrationLost, p.ID, p.Segment, p.Host, r.Remounts, strings.Join(lost, " and ")),
			Processes: []string{p.ID},
		})
	}
	return out
}
