package vllm

// linkHandshakes gives each engine's handshake with another command's front end that front end's
// shape. An engine derives its handshake from its own command line (its launcher's DP size), but the
// handshake it dials is the front end's: wait_for_engine_startup knows the engines it waits for
// (launch_core_engines' engines_to_handshake, vllm/v1/engine/utils.py), so an engine among them is
// one of that many, at its place in the list, whatever its own command says; an engine the front end
// does not wait for keeps its own view (and is refused: HandshakeExpect.Refuse). The front end
// serving an address is its first binder in deployment order (nodes, then commands): a later one
// fails its bind (StageHandshakeBind). Deployments whose commands agree are left as they are.
func linkHandshakes(plans []*NodePlan) {
	servers := map[string]*RendezvousPlan{}
	walkDeployment(plans, func(p *ProcessPlan) {
		for i := range p.Rendezvous {
			r := &p.Rendezvous[i]
			if r.Kind != RendezvousDP || !r.BindsEarly || r.Rank != 0 {
				continue
			}
			key := barrierKey(p.Identity.Host, r.Address)
			if _, taken := servers[key]; !taken {
				servers[key] = r
			}
		}
	})
	walkDeployment(plans, func(p *ProcessPlan) {
		for i := range p.Rendezvous {
			r := &p.Rendezvous[i]
			if r.Kind != RendezvousDP || r.BindsEarly || r.Hello == nil {
				continue
			}
			srv := servers[barrierKey(p.Identity.Host, r.Address)]
			if srv == nil || srv.Expect == nil {
				continue
			}
			e := srv.Expect
			if idx := r.Hello.Index; idx >= e.First && idx < e.First+e.Count {
				r.WorldSize, r.Rank = srv.WorldSize, 1+idx-e.First
			}
		}
	})
}

// walkDeployment calls f on every process of plans, in deployment order (nodes, commands, then
// each tree parent first).
func walkDeployment(plans []*NodePlan, f func(*ProcessPlan)) {
	var walk func(p *ProcessPlan)
	walk = func(p *ProcessPlan) {
		f(p)
		for _, c := range p.Children {
			walk(c)
		}
	}
	for _, np := range plans {
		if np == nil {
			continue
		}
		for _, top := range np.Commands {
			if top != nil {
				walk(top)
			}
		}
	}
}
