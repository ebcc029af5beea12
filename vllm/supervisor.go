package vllm

import (
	"slices"
	"strconv"
	"strings"

	"github.com/widetp/widetp/report"
)

// supervisor is run_dp_supervisor (vllm/entrypoints/openai/dp_supervisor.py): one external-LB
// API server per local DP rank, each with its own engine core. apiServerCount is the count
// ServeSubcommand.cmd resolved (vllm/entrypoints/cli/serve.py).
func (cp *cmdPlanner) supervisor(apiServerCount int) *ProcessPlan {
	id := cp.id(report.RoleDPSupervisor, 0)
	// No EngineID: the supervisor builds no KV connector (report.Process.EngineID).
	p := cp.newPlan(cp.identity(id, "", report.RoleDPSupervisor, nil))
	// DPSupervisor.__init__ validates the arguments again, as cmd left them: --headless's
	// api_server_count of 0 fails there.
	resolved := *cp.args
	resolved.APIServerCount = &apiServerCount
	if err := validateMultiPortExternalLB(&resolved); err != nil {
		p.Crash = &Crash{Stage: StageConfig, Error: crashText(err)}
		return p
	}
	var children []*ServeArgs
	for i := 0; i < *cp.args.DataParallelSizeLocal; i++ {
		child, err := supervisorChildArgs(cp.args, i)
		if err != nil {
			// DPSupervisor._start_children raises while it builds child i's arguments; run()
			// stops the children it started, and the supervisor dies of the ValueError. The
			// model starts none of them.
			p.Crash = &Crash{Stage: StageConfig, Error: crashText(err)}
			return p
		}
		children = append(children, child)
	}
	for _, child := range children {
		if cp.err != nil {
			break
		}
		p.Children = append(p.Children, cp.apiServer(child, *child.DataParallelRank, id, 1))
	}
	// DPSupervisor._monitor_children: a dead child shuts the others down, then the supervisor exits.
	p.StopsOnChildFailure = true
	return p
}

// supervisorStartRank is dp_supervisor.infer_multi_port_external_lb_start_rank.
func supervisorStartRank(a *ServeArgs) int {
	if a.DataParallelStartRank != nil {
		return *a.DataParallelStartRank
	}
	local := 0
	if a.DataParallelSizeLocal != nil {
		local = *a.DataParallelSizeLocal
	}
	return a.NodeRank * local
}

// supervisorChildArgs is dp_supervisor._build_vllm_dp_server_args: child i serves one external-LB
// DP rank on port --port + i, on its slice of the node's devices (_build_device_ids: entries
// i*TP*PP up to (i+1)*TP*PP of --device-ids, or those indices when it is absent; the child resolves
// them against its own CUDA_VISIBLE_DEVICES).
func supervisorChildArgs(a *ServeArgs, i int) (*ServeArgs, error) {
	c := *a
	c.Port = a.Port + i
	c.DataParallelRank = intPtr(supervisorStartRank(a) + i)
	c.DataParallelStartRank = nil
	c.DataParallelSizeLocal = intPtr(1)
	c.DataParallelExternalLB = true
	c.DataParallelHybridLB = false
	c.DataParallelMultiPortExternalLB = false
	c.APIServerCount = intPtr(1)
	per := a.TensorParallelSize * a.PipelineParallelSize
	start, stop := i*per, (i+1)*per
	var ids []string
	if a.hasOther("--device-ids") {
		given := strings.Split(a.lastOther("--device-ids"), ",")
		if stop > len(given) {
			return nil, valueError("--device-ids has %d entries, but DP rank %d needs devices [%d, %d)", len(given), i, start, stop)
		}
		ids = given[start:stop]
	} else {
		for d := start; d < stop; d++ {
			ids = append(ids, strconv.Itoa(d))
		}
	}
	// The child's device_ids is that list itself, not a flag to parse: an empty one (TP*PP of 0)
	// is no device ids at all (_resolve_device_ids: `if not self.device_ids`).
	c.Other = slices.DeleteFunc(slices.Clone(a.Other), func(o Option) bool { return o.Flag == "--device-ids" })
	if len(ids) > 0 {
		v := strings.Join(ids, ",")
		c.Other = append(c.Other, Option{Flag: "--device-ids", Value: &v})
	}
	return &c, nil
}
