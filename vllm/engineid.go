package vllm

import (
	"crypto/sha256"
	"fmt"
	"strconv"
)

// baseEngineID is the KV engine_id one CLI parse holds: the explicit `engine_id` of
// --kv-transfer-config, else the uuid4() KVTransferConfig.__post_init__ draws
// (vllm/config/kv_transfer.py). The model derives that uuid from the seed, the host and the
// command index, so every parse gets its own id (as in vLLM) and a run reproduces. It is "" when
// the config names no connector: no process builds one, and report.Process.EngineID is set only
// where one is built.
func baseEngineID(kv *KVTransferConfig, seed, host string, cmd int) string {
	if !kv.buildsConnector() {
		return ""
	}
	if kv.EngineID != nil {
		return *kv.EngineID
	}
	return derivedUUID4(seed, host, strconv.Itoa(cmd))
}

// derivedUUID4 formats a hash of the parts as a version-4 UUID (random-looking, deterministic).
func derivedUUID4(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0}) // separator: ("a","bc") and ("ab","c") must differ
	}
	b := h.Sum(nil)[:16]
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// engineIDSourceRank is the rank, in a worker's "workers" rendezvous, whose engine_id the worker
// adopts at init (vllm/distributed/kv_transfer/kv_transfer_state.py _sync_engine_id_across_tp):
// after PR #39907 the TP group's rank 0 broadcasts its engine_id; after PR #44528 the PP group's
// rank 0 broadcasts it again. worldRank is the worker's rank in that rendezvous, replicaRank its
// rank within the replica (ParallelConfig.rank). nil: no exchange (before #39907).
func engineIDSourceRank(pc *ParallelConfig, worldRank, replicaRank int, prof Profile) *int {
	tpRank, pcpRank, _ := pc.workerRanks(replicaRank)
	switch prof.EngineIDSync {
	case EngineIDSyncTP:
		// The TP group's rank 0: same DP, PP and PCP position, TP rank 0.
		return intPtr(worldRank - tpRank)
	case EngineIDSyncTPPP:
		// After the TP broadcast every member of a TP group holds its TP rank 0's id; the PP
		// broadcast then hands each worker the id of PP rank 0 of its PP group, i.e. the TP rank 0
		// of the first pipeline stage at the same DP and PCP position.
		replicaBase := worldRank - replicaRank
		return intPtr(replicaBase + pcpRank*pc.TensorParallelSize)
	}
	return nil
}
