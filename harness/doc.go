// Package harness runs a widetp scenario for real and judges it: the fake Mooncake store and one
// simulated vLLM node per scenario node, started in one round on a runtime — Docker (one FROM
// scratch container per host on a network of the run's own) or local (one process tree per host,
// with its own loopback address and /tmp) — then opens the store's start gate, so that the
// processes of every host start together, waits until every node has settled, reads what
// every simulated process reported, runs the checks, and tears everything down.
//
// Most callers need one call, Run, which owns the whole recipe (runtime, cluster, settle, report,
// artifacts, teardown):
//
//	s, err := scenarios.Load("scenarios/vllm48061-external-lb-colocated-buggy.yaml")
//	...
//	res, err := harness.Run(ctx, s, harness.WithRuntime(harness.RuntimeLocal),
//		harness.WithArtifactsOnFailure(harness.DefaultArtifactsBase()))
//	// res.Report is the report; res.Match says whether its violation kinds are the expected ones.
//
// A caller that looks at the live cluster before the teardown (a suite's further checks, fault
// injection through Cluster.Runtime: Kill, Pause, Restart) uses StartSession and Session.Finish,
// or the parts themselves: NewRuntime, StartCluster, Cluster.Settle, Cluster.Report,
// Cluster.WriteArtifacts, Cluster.Close.
//
// The hosts run the widetp binary itself (`widetp node`, `widetp store`): the widetp command
// passes itself, and a Go program or test that imports the harness names one with WithBinary or
// $WIDETP_BIN. The runtimes are registered in Runtimes; their implementations live under
// internal/ and need not be imported.
package harness
