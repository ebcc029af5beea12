package vllm

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// mooncakeDPEngineIndex is the Mooncake store connector's DP engine index
// (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py
// get_mooncake_dp_engine_index), computed by every worker (MooncakeStoreWorker.__init__) and
// every engine core's scheduler (get_zmq_rpc_path_lookup):
//
//	before PR #48061: if local_engines_only: assert data_parallel_rank_local is not None
//	                                         return data_parallel_rank_local
//	                  return data_parallel_index
//	after PR #48061:  return data_parallel_index
func mooncakeDPEngineIndex(pc *ParallelConfig, prof Profile) (int, error) {
	if prof.MooncakeDPIndex == MooncakeDPIndexLegacy && pc.LocalEnginesOnly() {
		if pc.DataParallelRankLocal == nil {
			return 0, bareAssertion
		}
		return *pc.DataParallelRankLocal, nil
	}
	return pc.DataParallelIndex, nil
}

// lookupPath is get_zmq_rpc_path_lookup (mooncake/store/scheduler.py, shared by the worker's
// LookupKeyServer and the scheduler's LookupKeyClient):
//
//	ipc://{VLLM_RPC_BASE_PATH}/lookup_rpc_port_{rpc_port}_host_{socket.gethostname()}_dp_rank{idx}
//
// rpc_port is kv_connector_extra_config["lookup_rpc_port"] (default 0), formatted as Python's
// f-string formats the JSON value.
func lookupPath(env vllmEnv, extra map[string]any, hostname string, idx int) string {
	port := "0"
	if v, ok := extra["lookup_rpc_port"]; ok {
		port = pyStr(v)
	}
	return fmt.Sprintf("ipc://%s/lookup_rpc_port_%s_host_%s_dp_rank%d", env.rpcBasePath, port, hostname, idx)
}

// storeLookupEnabled is the store scheduler's enable_lookup (mooncake/store/scheduler.py
// MooncakeStoreScheduler: kv_connector_extra_config.get("enable_lookup", True), used as a Python
// truth value, so "false" the string still enables it).
func storeLookupEnabled(extra map[string]any) bool {
	v, ok := extra["enable_lookup"]
	if !ok {
		return true
	}
	return pyTruthy(v)
}

// pyTruthy is Python's bool() of a decoded JSON value.
func pyTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// segmentHost is the local_hostname a worker's store client registers under: the
// MOONCAKE_REQUESTER_LOCAL_HOSTNAME override, else get_ip() (VLLM_HOST_IP, else the host's own
// address, which is its name in the simulation).
func segmentHost(env vllmEnv, host string) string {
	if env.mooncakeRequesterHostname != "" {
		return env.mooncakeRequesterHostname
	}
	if env.hostIP != "" {
		return env.hostIP
	}
	return host
}

// pyStr renders a decoded JSON value as Python's str() renders what json.loads returned.
func pyStr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return x
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			return s // a JSON integer is a Python int
		}
		f, err := x.Float64()
		if err != nil {
			return s
		}
		return pyFloatRepr(f)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pydanticRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		// A decoded JSON object keeps its order in Python; a Go map has none: sorted keys.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyRepr(k) + ": " + pydanticRepr(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// pyFloatRepr is Python's repr(float): the shortest round-trip digits, "x.0" for integral
// values, exponent notation below 1e-4 and from 1e16.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	a := math.Abs(f)
	if a != 0 && (a < 1e-4 || a >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		sign := exp[0]
		digits := strings.TrimLeft(exp[1:], "0")
		if len(digits) < 2 {
			digits = strings.Repeat("0", 2-len(digits)) + digits
		}
		return mant + "e" + string(sign) + digits
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
