package vllm

import (
	"fmt"
	"strconv"
	"strings"
)

// Port allocators of vllm/utils/network_utils.py. A process that needs a port number before the
// socket that uses it exists calls get_open_port (or get_open_ports_list for several): each try
// binds a TCP socket on every interface and closes it at once, so what comes back is a port that
// was free a moment ago — a probe, not a reservation (RFC #51275's "probe-then-bind"). With
// VLLM_PORT set the scan is deterministic: it starts at VLLM_PORT and walks up to the first port
// that binds. With VLLM_DP_MASTER_PORT set, [VLLM_DP_MASTER_PORT, +10) is reserved for the DP
// master and skipped. PortAlloc.Run runs these loops exactly as vLLM does against a PortProber —
// the real socket layer in a live run (simnode), the host's planned binds on paper (Predict).

// PortAlloc is one allocator call of a process.
type PortAlloc struct {
	// Func is "get_open_port" or "get_open_ports_list".
	Func string `json:"func"`
	// Count is get_open_ports_list's count.
	Count int `json:"count,omitempty"`
	// VLLMPort is envs.VLLM_PORT; nil when unset (every try asks the kernel for a free port).
	VLLMPort *int `json:"vllm_port,omitempty"`
	// Reserved is [VLLM_DP_MASTER_PORT, VLLM_DP_MASTER_PORT+10) when VLLM_DP_MASTER_PORT is in
	// the environment, nil otherwise (_get_reserved_port_range).
	Reserved *[2]int `json:"reserved,omitempty"`
	// List and Reserve are the profile's vllm_port_list and open_port_reserved rules.
	List    string `json:"list"`
	Reserve string `json:"reserve"`
}

// Allocator function names (PortAlloc.Func).
const (
	FuncGetOpenPort      = "get_open_port"
	FuncGetOpenPortsList = "get_open_ports_list"
)

// PortProber is the socket layer an allocator probes with.
type PortProber interface {
	// Bind binds port on every interface and releases it at once, reporting whether it bound.
	Bind(port int) bool
	// Ephemeral binds port 0 and returns the port the kernel picked, released.
	Ephemeral() (int, error)
}

// SpinError is an allocator that never returns: it keeps getting back an answer it rejects, or
// a set that does not grow, with nothing that could change the next answer. Stop (Run's
// argument) decided when to give up looking; vLLM has no such bound.
type SpinError struct {
	// Where is the function that spins and its file.
	Where string
	// Detail says what comes back on every try and why it is rejected.
	Detail string
	// Tries is how many times it asked before the bound stopped it.
	Tries int
}

func (e *SpinError) Error() string {
	return fmt.Sprintf("%s never returns: %s (%d tries)", e.Where, e.Detail, e.Tries)
}

// allocError is what the allocator raises (a Python exception text).
type allocError struct{ text string }

func (e *allocError) Error() string { return e.text }

// Run runs the allocator against p. spin is called with the try count each time the loop comes
// back around without progress; when it returns true Run gives up with a *SpinError. Any other
// error carries the Python exception vLLM raises (RuntimeError, OverflowError).
func (a PortAlloc) Run(p PortProber, spin func(tries int) bool) ([]int, error) {
	r := &allocRun{a: a, p: p, spin: spin}
	switch a.Func {
	case FuncGetOpenPort:
		port, err := r.getOpenPort()
		if err != nil {
			return nil, err
		}
		return []int{port}, nil
	case FuncGetOpenPortsList:
		return r.getOpenPortsList(a.Count)
	}
	return nil, fmt.Errorf("unknown port allocator %q", a.Func)
}

type allocRun struct {
	a     PortAlloc
	p     PortProber
	spin  func(int) bool
	tries int
}

func (r *allocRun) reserved(port int) bool {
	return r.a.Reserved != nil && port >= r.a.Reserved[0] && port < r.a.Reserved[1]
}

func (r *allocRun) reservedText() string {
	return fmt.Sprintf("[%d, %d)", r.a.Reserved[0], r.a.Reserved[1])
}

// getOpenPortInner is _get_open_port(start_port, max_attempts): a scan from start (VLLM_PORT when
// start is nil) up to the first port that binds, bounded by maxAttempts when it is positive; the
// kernel's choice when there is no start at all.
func (r *allocRun) getOpenPortInner(start *int, maxAttempts int) (int, error) {
	if start == nil {
		start = r.a.VLLMPort
	}
	if start == nil {
		port, err := r.p.Ephemeral()
		if err != nil {
			return 0, &allocError{"OSError: " + err.Error()}
		}
		return port, nil
	}
	port, attempts := *start, 0
	for {
		if port < 0 || port > 65535 {
			// socket.bind raises OverflowError, which is no OSError: the scan does not catch it.
			return 0, &allocError{"OverflowError: bind(): port must be 0-65535."}
		}
		if r.p.Bind(port) {
			return port, nil
		}
		port++
		attempts++
		if maxAttempts > 0 && attempts >= maxAttempts {
			return 0, &allocError{fmt.Sprintf("RuntimeError: Could not find open port after %d attempts starting from port %d", maxAttempts, *start)}
		}
	}
}

// getOpenPort is get_open_port under the profile's open_port_reserved rule.
func (r *allocRun) getOpenPort() (int, error) {
	if r.a.Reserve == OpenPortReservedRetry {
		// Before PR #50965: `while True: candidate = _get_open_port(); if candidate not in
		// reserved: return candidate`.
		if r.a.Reserved == nil {
			return r.getOpenPortInner(nil, 0)
		}
		for {
			c, err := r.getOpenPortInner(nil, 0)
			if err != nil || !r.reserved(c) {
				return c, err
			}
			r.tries++
			if r.spin(r.tries) {
				return 0, &SpinError{Where: "get_open_port (vllm/utils/network_utils.py)",
					Detail: fmt.Sprintf("_get_open_port() keeps returning %d (VLLM_PORT=%s), inside the reserved range %s", c, optPort(r.a.VLLMPort), r.reservedText()),
					Tries:  r.tries}
			}
		}
	}
	port, err := r.getOpenPortInner(nil, 0)
	if err != nil {
		return 0, err
	}
	if r.reserved(port) {
		stop := r.a.Reserved[1]
		return r.getOpenPortInner(&stop, 1000)
	}
	return port, nil
}

// getOpenPortsList is get_open_ports_list(count) under the profile's rules; the ports come in
// the order Python's list(set) gives them.
func (r *allocRun) getOpenPortsList(count int) ([]int, error) {
	var set pySet
	if r.a.List == VLLMPortListAdvance && r.a.VLLMPort != nil {
		// PR #36191: scan from one past each port found.
		next := *r.a.VLLMPort
		for i := 0; i < count; i++ {
			port, err := r.getOpenPortInner(&next, 1000)
			if err != nil {
				return nil, err
			}
			if r.a.Reserve == OpenPortReservedRescan && r.reserved(port) {
				// PR #50965 skips the reserved range here too.
				stop := r.a.Reserved[1]
				if port, err = r.getOpenPortInner(&stop, 1000); err != nil {
					return nil, err
				}
			}
			set.add(port)
			next = port + 1
		}
		return set.list(), nil
	}
	for set.len() < count {
		port, err := r.getOpenPort()
		if err != nil {
			return nil, err
		}
		if !set.add(port) {
			r.tries++
			if r.spin(r.tries) {
				return nil, &SpinError{Where: "get_open_ports_list (vllm/utils/network_utils.py)",
					Detail: fmt.Sprintf("get_open_port() keeps returning %d (VLLM_PORT=%s), so the set of %d ports stays at %s", port, optPort(r.a.VLLMPort), count, pyList(set.list())),
					Tries:  r.tries}
			}
		}
	}
	return set.list(), nil
}

func optPort(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

func pyList(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// pySet is CPython's set of small non-negative ints (Objects/setobject.c), kept only to give
// list(set) its order: hash(n) == n, a table of 8 slots that grows to the power of two above
// 4*used once 5*fill reaches 3*mask, linear probing over 9 slots, then perturbed jumps.
// get_open_ports_list returns list(ports_set) and ParallelConfig pops its last element as
// data_parallel_master_port, so the order is part of which port a process ends up with.
type pySet struct {
	table []int // -1 empty; ports are never negative
	used  int
}

const (
	pySetMinSize  = 8
	pyLinearProbe = 9
	pyPerturbBits = 5
)

func (s *pySet) len() int { return s.used }

// add inserts n and reports whether it was new.
func (s *pySet) add(n int) bool {
	if s.table == nil {
		s.table = newPyTable(pySetMinSize)
	}
	mask := len(s.table) - 1
	if slot, found := probe(s.table, n); found {
		return false
	} else {
		s.table[slot] = n
	}
	s.used++
	if s.used*5 >= mask*3 {
		newSize := pySetMinSize
		for newSize <= s.used*4 {
			newSize <<= 1
		}
		old := s.table
		s.table = newPyTable(newSize)
		for _, v := range old {
			if v >= 0 {
				slot, _ := probe(s.table, v)
				s.table[slot] = v
			}
		}
	}
	return true
}

func newPyTable(size int) []int {
	t := make([]int, size)
	for i := range t {
		t[i] = -1
	}
	return t
}

// probe returns the slot holding n (found) or the empty slot n goes to, as set_add_entry walks
// the table.
func probe(table []int, n int) (int, bool) {
	mask := len(table) - 1
	perturb := uint(n)
	i := n & mask
	for {
		if table[i] == n {
			return i, true
		}
		if table[i] < 0 {
			return i, false
		}
		if i+pyLinearProbe <= mask {
			for j := 1; j <= pyLinearProbe; j++ {
				if table[i+j] == n {
					return i + j, true
				}
				if table[i+j] < 0 {
					return i + j, false
				}
			}
		}
		perturb >>= pyPerturbBits
		i = (i*5 + 1 + int(perturb)) & mask
	}
}

// list is list(set): the table in slot order.
func (s *pySet) list() []int {
	out := make([]int, 0, s.used)
	for _, v := range s.table {
		if v >= 0 {
			out = append(out, v)
		}
	}
	return out
}
