package report

import (
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// AddressRole says what a process does with one address.
type AddressRole string

const (
	// AddressBind: the process listens on a TCP endpoint or binds an ipc path (a ZMQ ROUTER, an
	// HTTP server, a torch store). On one host a second TCP bind of a held port fails with
	// EADDRINUSE; a second ipc bind takes the path over silently (libzmq unlinks and rebinds).
	AddressBind AddressRole = "bind"
	// AddressOpen: the process opens a named per-host resource that the first opener creates
	// (a /dev/shm file opened O_CREAT|O_EXCL, then plainly by everyone after); ServedBy names the
	// creator, whose Key says whose resource it is.
	AddressOpen AddressRole = "open"
	// AddressConnect: the process dials a server and sends a request carrying Nonce; the server
	// that answers records the nonce in its bind entry's Served (ResolveAddresses joins them).
	AddressConnect AddressRole = "connect"
	// AddressProbe: a port allocator (vLLM's get_open_port, get_open_ports_list) binds and
	// releases ports to pick some; Ports is what it returned. A probe that never returns leaves
	// the process Hung.
	AddressProbe AddressRole = "probe"
	// AddressAdvertise: what the process tells peers outside it to dial (a KV connector's
	// remote_host:remote_port in kv_transfer_params); it binds nothing itself.
	AddressAdvertise AddressRole = "advertise"
)

// Address is one address a process binds, opens, dials, probes or advertises, as the model
// derives it from vLLM's code and, in a live run, with what happened to it.
type Address struct {
	// Channel names what the address is for: "api-server", "dp-handshake", "torch-world",
	// "nixl-side-channel", "offload-p2p-control", ... (README, "Addresses").
	Channel string      `json:"channel"`
	Role    AddressRole `json:"role"`
	// Endpoint is "tcp://host:port" (port 0: the kernel picks one at bind time and the binder
	// publishes it), "ipc:///path", "shm:///dev/shm/name", or for a probe "tcp://host:<first>"
	// (the port the scan starts from; 0 when the kernel picks).
	Endpoint string `json:"endpoint"`
	// Key is whose the address is: for a bind or open, the identity of the owner serving it (an
	// engine_id, a DP rank); for a connect, the identity the client must reach there. A client
	// answered by a server with another Key is misrouted.
	Key string `json:"key,omitempty"`
	// Source is the vLLM file (and function) the address comes from.
	Source string `json:"source"`
	// Exercised: a live run binds, opens, dials or probes it for real; otherwise it is derived and
	// listed only (vLLM binds it with port 0, or the rendezvous layer exercises it).
	Exercised bool `json:"exercised,omitempty"`

	// Ports is what a probe returned, in vLLM's order.
	Ports []int `json:"ports,omitempty"`
	// BindSeq orders the binds and opens of one host (1, 2, ...): who came first.
	BindSeq int `json:"bind_seq,omitempty"`
	// Error is the failure: a bind's exception (pyzmq's ZMQError, the OSError of a socket), or a
	// connect's "no answer within ..." — never set on success.
	Error string `json:"error,omitempty"`
	// Errno is the OS error of a bind or listen the kernel refused (98: EADDRINUSE), whatever
	// the exception says: gRPC's names only the address.
	Errno int `json:"errno,omitempty"`
	// Nonce is carried by a connect's request; Served lists the nonces a bind entry answered.
	Nonce  string   `json:"nonce,omitempty"`
	Served []string `json:"served,omitempty"`
	// ServedBy is the ID of the process that answered a connect, or created what an open found.
	ServedBy string `json:"served_by,omitempty"`
}

// AddrInUse reports a bind or listen the kernel refused with EADDRINUSE: the errno the run
// recorded, or the message of a record without one.
func (a Address) AddrInUse() bool {
	return a.Errno == 98 || strings.Contains(a.Error, "Address already in use")
}

// Answered reports whether a connect got an answer (from whoever) or an open found its resource.
func (a Address) Answered() bool { return a.Error == "" && (a.ServedBy != "" || a.Nonce != "") }

// Tried reports whether the address's step happened at all (it has an outcome).
func (a Address) Tried() bool {
	switch a.Role {
	case AddressConnect, AddressOpen:
		return a.Error != "" || a.ServedBy != "" || a.Nonce != ""
	case AddressBind:
		return a.Error != "" || a.BindSeq > 0
	case AddressProbe:
		return a.Error != "" || len(a.Ports) > 0
	}
	return true
}

// Hang is a step that never returned: the process lives on but makes no progress, and the run's
// deadline is what caught it (vLLM has none there: it would spin for ever).
type Hang struct {
	// Where is the function that never returned and its vLLM file.
	Where string `json:"where"`
	// Deadline is the bound that caught it ("2s"); a prediction says which bound it would be.
	Deadline string `json:"deadline"`
	// Detail says why it cannot return (the port it keeps getting back, the range that rejects it).
	Detail string `json:"detail"`
}

// ResolveAddresses fills ServedBy of every connect whose nonce a bind entry lists in Served, on
// any host (the transports are TCP). Predictions set ServedBy directly; live runs need the join
// because the reply is the server's word only.
func ResolveAddresses(procs []Process) {
	server := map[string]string{}
	for _, p := range procs {
		for _, a := range p.Addresses {
			for _, n := range a.Served {
				server[n] = p.ID
			}
		}
	}
	for i := range procs {
		for j := range procs[i].Addresses {
			a := &procs[i].Addresses[j]
			if a.Role != AddressConnect || a.ServedBy != "" || a.Nonce == "" || a.Error != "" {
				continue
			}
			if id, ok := server[a.Nonce]; ok {
				a.ServedBy = id
			}
		}
	}
}

// Interface classes of a TCP bind host, for deciding which binds of one port on one host collide.
const (
	// IfaceAny is the wildcard (0.0.0.0, ::, "", *): it collides with every bind of its port.
	IfaceAny = "*"
	// IfaceLoopback is 127.0.0.0/8, ::1 or "localhost": the host's own loopback.
	IfaceLoopback = "loopback"
)

// SocketKey names the socket an endpoint binds on its host: ipc and shm endpoints by their cleaned
// path (two spellings of one file are one socket), tcp ones by port and interface class (IfaceAny,
// IfaceLoopback, or the host part as written). ok is false for an endpoint that does not parse
// or binds port 0 (the kernel picks a free port: nothing to collide on).
func SocketKey(endpoint string) (scheme, iface string, port int, path string, ok bool) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme == "" {
		return "", "", 0, "", false
	}
	switch u.Scheme {
	case "ipc", "shm":
		p := strings.TrimPrefix(endpoint, u.Scheme+"://")
		if p == "" {
			return "", "", 0, "", false
		}
		return u.Scheme, "", 0, cleanPath(p), true
	case "tcp", "http":
		h, ps, err := net.SplitHostPort(u.Host)
		if err != nil {
			return "", "", 0, "", false
		}
		n, err := strconv.Atoi(ps)
		if err != nil || n <= 0 || n > 65535 {
			return "", "", 0, "", false
		}
		return "tcp", IfaceClass(h), n, "", true
	}
	return "", "", 0, "", false
}

// IfaceClass classifies the host part of a bind address (see SocketKey).
func IfaceClass(h string) string {
	switch h {
	case "", "*", "0.0.0.0", "::":
		return IfaceAny
	case "localhost":
		return IfaceLoopback
	}
	if ip := net.ParseIP(h); ip != nil {
		if ip.IsUnspecified() {
			return IfaceAny
		}
		if ip.IsLoopback() {
			return IfaceLoopback
		}
	}
	return h
}

// SameSocket reports whether two binds on one host contend for one socket: the same ipc/shm file,
// or the same TCP port on overlapping interfaces (equal, or either the wildcard — Linux refuses a
// specific bind of a port a wildcard listener holds, and the reverse).
func SameSocket(a, b string) bool {
	sa, ia, pa, fa, oka := SocketKey(a)
	sb, ib, pb, fb, okb := SocketKey(b)
	if !oka || !okb || sa != sb {
		return false
	}
	if sa != "tcp" {
		return fa == fb
	}
	return pa == pb && (ia == ib || ia == IfaceAny || ib == IfaceAny)
}

func cleanPath(p string) string {
	if p == "" {
		return p
	}
	return path.Clean(p)
}
