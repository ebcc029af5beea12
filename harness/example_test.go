package harness_test

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

// Run vLLM#48061's co-located launch on the local runtime, before the fix: every violation the
// scenario expects is observed. (The widetp binary the hosts run comes from $WIDETP_BIN, which
// this package's TestMain sets.)
func Example() {
	ctx := context.Background()
	s, err := scenarios.Load(filepath.Join("..", "scenarios", "vllm48061-external-lb-colocated-buggy.yaml"))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := harness.Run(ctx, s, harness.WithRuntime(harness.RuntimeLocal))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("verdict:", res.Report.Verdict)
	fmt.Println("observed:", report.KindSet(res.Report.Violations))
	fmt.Println("as expected:", res.Match)
	// Output:
	// verdict: fail
	// observed: [dp-index-mismatch lookup-misrouted lookup-path-collision]
	// as expected: true
}
