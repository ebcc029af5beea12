package check

import (
	"fmt"

	"github.com/widetp/widetp/report"
)

// segmentNameCollision reports Mooncake segment names held by more than one live process. A
// segment is named by its local_hostname (host:port); the master either keeps both registrations
// under one name or refuses the second, depending on its version (mooncake-store/src/master_service.cpp MountSegment), and in
// both cases one worker's KV cache is unreachable by name. Crashed holders no longer hold theirs:
// the master expires a client that stops pinging.
func segmentNameCollision(procs []report.Process) []report.Violation {
	holders := map[string][]*report.Process{}
	for i := range procs {
		p := &procs[i]
		if p.Segment == "" || !p.Live() {
			continue
		}
		holders[p.Segment] = append(holders[p.Segment], p)
	}
	var out []report.Violation
	for _, seg := range sortedKeys(holders) {
		ps := holders[seg]
		if len(ps) < 2 {
			continue
		}
		out = append(out, report.Violation{
			Kind: report.SegmentNameCollision,
			Message: fmt.Sprintf("%s: %d live processes hold Mooncake segment %q: %s",
				report.SegmentNameCollision, len(ps), seg, idList(ids(ps))),
			Processes: ids(ps),
		})
	}
	return out
}
