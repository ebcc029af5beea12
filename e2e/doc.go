// Package e2e is widetp's end-to-end Ginkgo suite (`ginkgo ./e2e`, `make e2e`): every scenario of
// scenarios/ runs for real — on Docker when an engine answers, on the local runtime otherwise, on
// both (with a parity spec) when both are there — and must show exactly its expected violations,
// which must be the ones `widetp explain` predicts; regression specs for vLLM#48061 and the
// co-located lookup collision; generated deployments, one per launch path, run as their plans
// predict, and the healthy ones again under a generated fault timeline as the model predicts it;
// and leak specs: nothing a run made outlives it, even a `widetp run`
// killed with SIGKILL half-way or interrupted with SIGINT. See README.md, "Quick start".
package e2e
