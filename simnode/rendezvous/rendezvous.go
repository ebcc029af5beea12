// Package rendezvous is the barrier the processes of one replica meet at before they build their
// KV connectors: a small TCPStore-like rendezvous over real TCP. The member with rank 0 listens at
// the barrier's address (torch's TCPStore master at --master-addr:--master-port, or the DP group's
// --data-parallel-address:--data-parallel-rpc-port); every other member connects to it, retrying
// while it is not up yet; all of them return once WorldSize members are there. A member that never
// comes ends the barrier for everyone who did, within the timeout, with torch's error and the ranks
// that were missing — never a hang.
package rendezvous

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// Member is one process's place in one barrier.
type Member struct {
	// Kind is "workers" or "dp" (vllm.RendezvousPlan.Kind); members of different kinds at one
	// address are a configuration error, not one barrier.
	Kind string
	// Address is host:port of rank 0's listener, as the model computed it.
	Address   string
	WorldSize int
	Rank      int
	// ID names the process in the other members' logs.
	ID string
	// Value is what this member brings to the barrier; every member leaves with every member's
	// value (torch's store exchange: vLLM broadcasts the KV engine_id this way at worker init).
	Value string
	// Want, when set, names the ranks whose values this member leaves with, as a torch store
	// client gets only the keys it reads; nil: every member's. A world of 512 workers that each
	// read one rank's engine_id would otherwise take 511 answers of every value (some 25 KiB
	// each) from rank 0.
	Want []int
	// Hello is what this member says about itself when it arrives (an engine core's HELLO on a
	// front end's handshake), for rank 0's Screen; nil says nothing.
	Hello []byte
	// Lost, when set, is what this member raises when rank 0 never answers it: rank 0 goes away
	// first (its connection closes), or never listens at all. vLLM's handshake is a ZMQ socket,
	// which hides a peer's disconnect, reconnects in silence and connects to an endpoint nobody
	// binds without an error: such a member keeps waiting, like a held one, until it is stopped or
	// its time runs out, and then raises Lost. Empty: torch's store client, which fails at once
	// (DistNetworkError) when rank 0 goes, and at its time-out when rank 0 never listens.
	Lost string
	// Screen, on rank 0, judges each member's Hello as it arrives (vLLM's front end reads each
	// engine's HELLO as it comes). A Refuse ends the barrier at once: Join returns an *Error with
	// it, and every member that joined gets the answer its own Screening names.
	Screen func(hello []byte) Screening
}

// Screening is rank 0's judgement of one member's Hello.
type Screening struct {
	// Refuse is the exception rank 0 raises because of this member ("" admits it).
	Refuse string
	// Answer is the error this member is told when the barrier ends in a refusal; with Hold it is
	// told nothing and waits until it is stopped (its own parent is the process that refused), or
	// gives up with Answer at its time-out.
	Answer string
	Hold   bool
	// Late is an exception rank 0 raises because of this member once the barrier has completed
	// (every member got its answer): vLLM's front end refuses an engine's READY, which follows the
	// handshake. Result.Late carries the first one.
	Late string
}

// Result is a completed barrier.
type Result struct {
	// Values are the members' values, by rank.
	Values map[int]string
	// Late, on rank 0, is the first Screening.Late of the members, in arrival order.
	Late string
	// IDs, on rank 0, are the members' Member.ID by rank (rank 0's own included).
	IDs map[int]string
}

func (m Member) validate() error {
	if m.Kind == "" {
		return fmt.Errorf("rendezvous %s: empty kind", m.Address)
	}
	if m.WorldSize < 1 {
		return fmt.Errorf("rendezvous %s %s: world size %d < 1", m.Kind, m.Address, m.WorldSize)
	}
	if m.Rank < 0 || m.Rank >= m.WorldSize {
		return fmt.Errorf("rendezvous %s %s: rank %d outside world size %d", m.Kind, m.Address, m.Rank, m.WorldSize)
	}
	_, port, err := net.SplitHostPort(m.Address)
	if err != nil {
		return fmt.Errorf("rendezvous %s: address %q: %w", m.Kind, m.Address, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("rendezvous %s: address %q: port %q is not 1-65535", m.Kind, m.Address, port)
	}
	return nil
}

// Config is how a member reaches the others. The zero value is not usable: Timeout is required.
type Config struct {
	// Timeout bounds each side: rank 0 waits this long for the others from when it listens, another
	// member tries this long to connect and then waits this long for rank 0's verdict (torch bounds
	// the connect and each store operation separately, too).
	Timeout time.Duration
	// ListenIP is the address rank 0 listens on ("" or 0.0.0.0 in a container; a 127.0.0.x per
	// simulated host in a local run, so that hosts' ports do not clash).
	ListenIP string
	// Resolve maps the host part of Address to a dialable address (WIDETP_HOSTS, then DNS).
	// nil uses the address as is.
	Resolve func(ctx context.Context, host string) (string, error)
	// Forget, when set, is told the host of a dial that failed and why: Resolve may have to ask
	// again (the host may have come back at another address).
	Forget func(host string, err error)
	// Relay, when set, is shared by the members of one host: while rank 0 is not up, one of them
	// keeps trying it and the others wait to hear that it answered. nil: every member tries on
	// its own.
	Relay Relay
	// StoppedWith, on rank 0, tells which members (by Member.ID) are stopped by whatever stops rank
	// 0 (the same command's teardown: a failing parent's cascade, the harness's, a restart). When
	// rank 0 is stopped before its barrier completes, those members hear Hold: they wait to be
	// stopped in turn, as vLLM's processes of one launch go down together, and raise torch's
	// DistNetworkError only if their time runs out first. The others see the connection close and
	// raise it at once, as torch's store client does when its master goes. nil: none is held.
	StoppedWith func(id string) bool
}

// Relay lets the members of one host that wait for the same rank 0 take turns at trying it. Each
// of vLLM's processes retries its own connect (torch's TCPStore client), but the simulation's
// processes are many on two cores: the 511 workers of a 64-host wide-TP run that wait seconds for
// rank 0's host to start its worker tried some 20,000 connects between them, a fifth of the
// run's CPU. Shared per host, the attempts are as frequent and go through the same network (the
// members of a host share its address and its partitions), but one member makes them. It changes
// no outcome: a member that waits still gives up at its own time-out with torch's error, and one
// that is woken connects, or fails and waits again, on its own.
type Relay interface {
	// Wait is called by a member whose connect failed. It returns once the member is to try again:
	// lead true when it is now the one that keeps trying (no other member of the host is, or the
	// one that was gave up), false when another member of the host has just connected (rank 0 is
	// up). An error (ctx ended, the relay is gone) leaves the member trying on its own.
	Wait(ctx context.Context, address string) (lead bool, err error)
	// Reached tells the members waiting for address that a connect succeeded.
	Reached(address string)
	// Quit says this member stopped trying address without connecting: another one takes over.
	Quit(address string)
}

func (c Config) validate() error {
	if c.Timeout <= 0 {
		return fmt.Errorf("rendezvous: timeout %v must be positive", c.Timeout)
	}
	return nil
}

// Error is a barrier that did not complete. Python is the exception vLLM's process raises (torch's
// DistStoreError or DistNetworkError, or a RuntimeError for a member the barrier refused).
type Error struct {
	Python string
	// Missing names the ranks that never arrived ("rank 3"), as far as this member knows: rank 0
	// knows everyone who came; a member that never reached rank 0 knows only that rank 0 is missing.
	Missing []string
}

func (e *Error) Error() string { return e.Python }

// Join takes part in the barrier and returns once all WorldSize members arrived, or an *Error once
// the barrier cannot complete (other errors mean bad input). ctx cancels the wait.
func Join(ctx context.Context, m Member, cfg Config) (Result, error) {
	if err := m.validate(); err != nil {
		return Result{}, err
	}
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	if m.WorldSize == 1 {
		return Result{Values: map[int]string{0: m.Value}, IDs: map[int]string{0: m.ID}}, nil
	}
	if m.Rank == 0 {
		return serve(ctx, m, cfg)
	}
	return join(ctx, m, cfg)
}

// hello is what a member sends rank 0; verdict is rank 0's answer.
type hello struct {
	Kind      string          `json:"kind"`
	WorldSize int             `json:"world_size"`
	Rank      int             `json:"rank"`
	ID        string          `json:"id"`
	Value     string          `json:"value,omitempty"`
	Hello     json.RawMessage `json:"hello,omitempty"`
	// Want is Member.Want: null asks for every value, [] for none.
	Want []int `json:"want"`
}

type verdict struct {
	OK bool `json:"ok,omitempty"`
	// Hold: rank 0 refused the barrier (Screening.Hold) or was stopped (Config.StoppedWith) and
	// tells this member nothing more.
	Hold bool `json:"hold,omitempty"`
	// Values are every member's value by rank (with OK).
	Values  map[int]string `json:"values,omitempty"`
	Error   string         `json:"error,omitempty"`
	Missing []string       `json:"missing,omitempty"`
}

func rankName(r int) string { return "rank " + strconv.Itoa(r) }

// Listener is rank 0's socket of a barrier bound ahead of the barrier: vLLM's front end binds the
// handshake socket its engines join before it starts them.
type Listener struct {
	m  Member
	ln net.Listener
}

// BindError is a Listen that could not bind; Err wraps the socket error (syscall.EADDRINUSE
// when another process holds the address).
type BindError struct {
	Address string
	Err     error
}

func (e *BindError) Error() string {
	return fmt.Sprintf("rendezvous %s: bind: %v", e.Address, e.Err)
}

func (e *BindError) Unwrap() error { return e.Err }

// Listen binds rank 0's socket of m's barrier now; Join on the Listener serves the barrier later.
// m must have rank 0. A socket that cannot bind is a *BindError (other errors mean bad input).
func Listen(ctx context.Context, m Member, cfg Config) (*Listener, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if m.Rank != 0 {
		return nil, fmt.Errorf("rendezvous %s %s: only rank 0 listens, not rank %d", m.Kind, m.Address, m.Rank)
	}
	ln, err := listen(ctx, m, cfg)
	if err != nil {
		return nil, &BindError{Address: m.Address, Err: err}
	}
	return &Listener{m: m, ln: ln}, nil
}

// Join serves the barrier from the bound socket, as Join does for rank 0, with m's Value (the
// member the Listener was bound for, with this Value). The socket is closed when it returns.
func (l *Listener) Join(ctx context.Context, value string, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		l.Close()
		return Result{}, err
	}
	m := l.m
	m.Value = value
	if m.WorldSize == 1 {
		l.Close()
		return Result{Values: map[int]string{0: m.Value}, IDs: map[int]string{0: m.ID}}, nil
	}
	return serveOn(ctx, m, cfg, l.ln)
}

// Close releases the socket; closing twice is harmless.
func (l *Listener) Close() error {
	err := l.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
