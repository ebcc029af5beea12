package matchers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/report"
)

// Processes returns a function for Eventually that reads the latest record of every process from
// the fake store, and ends the polling (gomega.StopTrying) as soon as a process has crashed: a
// crashed process never comes up, so polling on would only burn the timeout, and the failure says
// at once which process on which host died of what.
//
//	Eventually(matchers.Processes(store)).WithContext(ctx).WithTimeout(bound).Should(matchers.HaveReadyProcesses(16))
func Processes(store *client.Client) func(context.Context) ([]report.Process, error) {
	return func(ctx context.Context) ([]report.Process, error) {
		procs, err := store.Reports(ctx)
		if err != nil {
			return nil, err
		}
		var crashed []string
		for _, p := range procs {
			if p.Crashed() {
				crashed = append(crashed, fmt.Sprintf("%s on host %s (%s)", p.ID, p.Host, describeExit(p.Exit)))
			}
		}
		if len(crashed) > 0 {
			sort.Strings(crashed)
			return procs, gomega.StopTrying("a process crashed, so the deployment will not come up: "+strings.Join(crashed, "; ")).Attach("processes", procs)
		}
		return procs, nil
	}
}

// HaveReadyProcesses succeeds when there are exactly n records and every one is up: ready and
// not exited. The failure names each process that is not, with its host.
func HaveReadyProcesses(n int) types.GomegaMatcher {
	return &processMatcher{name: fmt.Sprintf("be %d ready processes", n), find: func(procs []report.Process) []finding {
		var out []finding
		if len(procs) != n {
			out = append(out, finding{"-", "-", fmt.Sprintf("%d records, want %d", len(procs), n)})
		}
		for _, p := range procs {
			switch {
			case p.Exit != nil:
				out = append(out, finding{p.Host, p.ID, describeExit(p.Exit)})
			case !p.Ready:
				out = append(out, finding{p.Host, p.ID, "still starting"})
			}
		}
		sortFindings(out)
		return out
	}}
}
