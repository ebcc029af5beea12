package vllm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/widetp/widetp/report"
)

// KV cache events (--kv-events-config): every engine core's scheduler builds an event publisher
// (vllm/v1/core/sched/scheduler.py Scheduler.__init__, right after its KV connector:
// EventPublisherFactory.create(kv_events_config, parallel_config.data_parallel_index)). The ZMQ
// publisher (vllm/distributed/kv_events.py ZmqEventPublisher) offsets its endpoint's port by the
// engine's global DP index, so the engines of one host publish on distinct ports only when their
// DP indexes differ: two deployments on one host (a prefill and a decode instance, say) whose
// engines share an index fight over one port, and the later one's engine core dies at start-up.

// KVEventsConfig is --kv-events-config (vllm/config/kv_events.py KVEventsConfig): the fields that
// decide where an engine's scheduler publishes.
type KVEventsConfig struct {
	Enabled bool `json:"enable_kv_cache_events"`
	// Publisher is "null" or "zmq"; KVEventsConfig.__post_init__ makes an unset one "zmq" when
	// events are enabled and "null" otherwise.
	Publisher      string  `json:"publisher"`
	Endpoint       string  `json:"endpoint"`
	ReplayEndpoint *string `json:"replay_endpoint,omitempty"`
}

// publishes is EventPublisherFactory.create choosing the ZMQ publisher (the null one binds
// nothing).
func (k *KVEventsConfig) publishes() bool {
	return k != nil && k.Enabled && k.Publisher != "null"
}

// kvEventsFromMap reads a --kv-events-config whose fields pydantic validated against
// KVEventsConfig's schema (checkConfig, inside argparse's type=), and runs the part of its
// __post_init__ the model needs: an unset publisher is "zmq" when events are enabled, else
// "null" (vllm/config/kv_events.py).
func kvEventsFromMap(m map[string]any) *KVEventsConfig {
	k := &KVEventsConfig{Endpoint: "tcp://*:5557"}
	k.Enabled, _ = pydanticBool(m["enable_kv_cache_events"])
	if e, ok := m["endpoint"].(string); ok {
		k.Endpoint = e
	}
	if r, ok := m["replay_endpoint"].(string); ok {
		k.ReplayEndpoint = &r
	}
	if p, ok := m["publisher"].(string); ok {
		k.Publisher = p
	} else {
		k.Publisher = "null"
		if k.Enabled {
			k.Publisher = "zmq"
		}
	}
	return k
}

// pydanticBool is pydantic's lax bool: JSON booleans, the integers 0 and 1 (and floats equal to
// them), and the strings it recognises in any case. msg is pydantic's error, "" when v is valid.
func pydanticBool(v any) (b bool, msg string) {
	switch x := v.(type) {
	case bool:
		return x, ""
	case json.Number:
		f, err := x.Float64()
		if err == nil && (f == 0 || f == 1) {
			return f == 1, ""
		}
		return false, "Input should be a valid boolean, unable to interpret input"
	case string:
		switch strings.ToLower(x) {
		case "0", "off", "f", "false", "n", "no":
			return false, ""
		case "1", "on", "t", "true", "y", "yes":
			return true, ""
		}
		return false, "Input should be a valid boolean, unable to interpret input"
	}
	return false, "Input should be a valid boolean"
}

// pydanticRepr renders a decoded JSON value as pydantic's input_value does (Python's repr()).
func pydanticRepr(v any) string {
	if s, ok := v.(string); ok {
		return pyRepr(s)
	}
	return pyStr(v)
}

// offsetEndpointPort is ZmqEventPublisher.offset_endpoint_port: an empty endpoint or DP index 0
// stays as it is; an endpoint naming inproc gets a "_dp<index>" suffix; one naming tcp with a
// colon gets the number after its last colon raised by the index (Python's int() of that text,
// whose ValueError propagates) — except port 0 when keepZero (PR #55844); anything else raises
// ValueError.
func offsetEndpointPort(endpoint string, index int, keepZero bool) (string, error) {
	if endpoint == "" || index == 0 {
		return endpoint, nil
	}
	if strings.Contains(endpoint, "inproc") {
		return fmt.Sprintf("%s_dp%d", endpoint, index), nil
	}
	if !strings.Contains(endpoint, "tcp") {
		return "", &PyError{Type: "ValueError", Msg: "Invalid endpoint: must contain 'inproc' or 'tcp'"}
	}
	i := strings.LastIndex(endpoint, ":")
	if i < 0 {
		return endpoint, nil
	}
	port, err := pyInt(endpoint[i+1:])
	if err != nil {
		return "", &PyError{Type: "ValueError", Msg: "invalid literal for int() with base 10: " + pyRepr(endpoint[i+1:])}
	}
	if port == 0 && keepZero {
		return endpoint, nil
	}
	return endpoint[:i] + ":" + strconv.Itoa(port+index), nil
}

// publisherBinds is ZmqEventPublisher._socket_setup's rule for its PUB socket: bind an endpoint
// with a wildcard ("*" or "::") or an ipc/inproc one, connect to any other.
func publisherBinds(endpoint string) bool {
	return strings.Contains(endpoint, "*") || strings.Contains(endpoint, "::") ||
		strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://")
}

// kvEventsBindable: a run binds the endpoint for real — a wildcard tcp one (tcp://*:port, the
// form the publisher binds) with a port libzmq takes, or an absolute ipc path. inproc sockets live
// inside the process; IPv6 wildcards (the publisher's socket does not enable IPv6) and endpoints
// libzmq would refuse are listed, not bound.
func kvEventsBindable(endpoint string) bool {
	if p, ok := strings.CutPrefix(endpoint, "ipc://"); ok {
		return strings.HasPrefix(p, "/")
	}
	m := kvEventsTCP().FindStringSubmatch(endpoint)
	if m == nil {
		return false
	}
	port, err := strconv.Atoi(m[1])
	return err == nil && port <= 65535
}

var kvEventsTCP = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^tcp://\*:([0-9]{1,5})$`) })

// kernelPicked is PR #55844's bind of a wildcard at port 0: the node's own address (get_ip()),
// the port the kernel's, read back with LAST_ENDPOINT.
func (cp *cmdPlanner) kernelPicked(endpoint string) string {
	if endpoint != "tcp://*:0" {
		return endpoint
	}
	return "tcp://" + hostPort(cp.hostIP, 0)
}

// kvEventsAddresses lists an engine core's event publisher, which its scheduler builds after its
// KV connector (so an engine core that failed before, its connector included, builds none): the
// PUB socket at the offset endpoint, then the replay ROUTER, always bound. An endpoint the offset
// cannot read makes the engine core raise there, unless a worker stopped it before
// (schedulerUnbuilt).
func (cp *cmdPlanner) kvEventsAddresses(p *ProcessPlan, pc *ParallelConfig, add func(AddressPlan)) {
	k := cp.args.KVEvents
	if !k.publishes() || pc == nil || p.Crash != nil {
		return
	}
	idx := pc.DataParallelIndex
	kernel := cp.opts.Profile.KVEventsPortZero == KVEventsPortZeroKernel
	pub, err := offsetEndpointPort(k.Endpoint, idx, kernel)
	var replay string
	if err == nil && k.ReplayEndpoint != nil {
		replay, err = offsetEndpointPort(*k.ReplayEndpoint, idx, kernel)
	}
	if err != nil {
		schedulerRaises(p, err)
		return
	}
	src := "vllm/distributed/kv_events.py ZmqEventPublisher (endpoint offset by data_parallel_index; built by vllm/v1/core/sched/scheduler.py Scheduler.__init__)"
	role, how := report.AddressConnect, "PUB connect: no wildcard in the endpoint"
	if publisherBinds(pub) {
		role, how = report.AddressBind, "PUB bind"
	}
	if kernel {
		pub, replay = cp.kernelPicked(pub), cp.kernelPicked(replay)
	}
	add(AddressPlan{Address: report.Address{Channel: "kv-events", Role: role, Endpoint: pub,
		Key: fmt.Sprintf("publisher dp%d", idx), Exercised: role == report.AddressBind && kvEventsBindable(pub),
		Source: src + "; " + how}, Stage: StageConnectorInit, Flavor: BindFlavorZMQ})
	if k.ReplayEndpoint == nil {
		return
	}
	add(AddressPlan{Address: report.Address{Channel: "kv-events", Role: report.AddressBind, Endpoint: replay,
		Key: fmt.Sprintf("replay dp%d", idx), Exercised: kvEventsBindable(replay),
		Source: src + "; replay ROUTER bind"}, Stage: StageConnectorInit, Flavor: BindFlavorZMQ})
}
