package vllm

import "github.com/widetp/widetp/report"

// supervisor is run_dp_supervisor (vllm/entrypoints/openai/dp_supervisor.py): one external-LB
// API server per local DP rank, each with its own engine core.
func (cp *cmdPlanner) supervisor() *ProcessPlan {
	id := cp.id(report.RoleDPSupervisor, 0)
	// No EngineID: the supervisor builds no KV connector (report.Process.EngineID).
	p := cp.newPlan(cp.identity(id, "", report.RoleDPSupervisor, nil))
	for i := 0; i < *cp.args.DataParallelSizeLocal && cp.err == nil; i++ {
		child := supervisorChildArgs(cp.args, i)
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
// DP rank on port --port + i.
func supervisorChildArgs(a *ServeArgs, i int) *ServeArgs {
	c := *a
	c.Port = a.Port + i
	c.DataParallelRank = intPtr(supervisorStartRank(a) + i)
	c.DataParallelStartRank = nil
	c.DataParallelSizeLocal = intPtr(1)
	c.DataParallelExternalLB = true
	c.DataParallelHybridLB = false
	c.DataParallelMultiPortExternalLB = false
	c.APIServerCount = intPtr(1)
	return &c
}
