package rendezvous

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/widetp/widetp/simnode/pace"
)

const (
	// firstRetry and maxRetry bound the pause between attempts to reach a rank 0 that is not
	// listening yet (pace.Pause): quick at first, as the processes of one replica start within
	// milliseconds of each other; at most twice a second for a member whose rank 0 is on a host
	// that starts late. torch's TCPStore client backs off further still (from half a second,
	// growing by half with jitter).
	firstRetry = 10 * time.Millisecond
	maxRetry   = 500 * time.Millisecond
	// verdictGrace is added to the wait for rank 0's answer: rank 0 was listening before this member
	// connected, so its own deadline falls within Timeout of the connect; the grace lets its
	// time-out verdict (with the missing ranks) arrive before this member gives up on its own.
	verdictGrace = time.Second
)

// join is every rank but 0: connect (retrying), say hello, wait for the verdict.
func join(ctx context.Context, m Member, cfg Config) (Result, error) {
	host, port, _ := net.SplitHostPort(m.Address)
	connectBy := time.Now().Add(cfg.Timeout)
	cctx, cancel := context.WithDeadline(ctx, connectBy)
	defer cancel()
	var conn net.Conn
	started := time.Now()
	// lead: this member paces its own attempts (always without a Relay); otherwise it waits for the
	// host's member that does.
	lead := cfg.Relay == nil
	for {
		var err error
		conn, err = dial(cctx, cfg, host, port)
		if err == nil {
			break
		}
		if cfg.Forget != nil {
			cfg.Forget(host, err)
		}
		if !lead {
			l, werr := cfg.Relay.Wait(cctx, m.Address)
			if werr == nil && !l {
				continue // another member connected: rank 0 is up
			}
			// Leading now, or the relay is gone (or the time is up, which the pause sees).
			lead = true
		}
		t := time.NewTimer(pace.Pause(time.Since(started), firstRetry, maxRetry))
		select {
		case <-t.C:
		case <-cctx.Done():
			t.Stop()
			if cfg.Relay != nil {
				cfg.Relay.Quit(m.Address)
			}
			if ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			if m.Lost != "" {
				// A ZMQ connect to an endpoint nobody binds succeeds, and the member waits for an
				// answer until its time runs out.
				return Result{}, &Error{Python: m.Lost, Missing: []string{rankName(0)}}
			}
			return Result{}, &Error{
				Python: fmt.Sprintf("torch.distributed.DistNetworkError: The client socket has timed out after %dms while trying to connect to (%s, %s).",
					cfg.Timeout.Milliseconds(), host, port),
				Missing: []string{rankName(0)},
			}
		}
	}
	if cfg.Relay != nil {
		cfg.Relay.Reached(m.Address)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	conn.SetDeadline(time.Now().Add(cfg.Timeout + verdictGrace))
	if err := json.NewEncoder(conn).Encode(hello{Kind: m.Kind, WorldSize: m.WorldSize, Rank: m.Rank, ID: m.ID, Value: m.Value, Hello: m.Hello, Want: m.Want}); err != nil {
		return Result{}, lostRank0(ctx, m, connectBy, cfg.Timeout+verdictGrace, err)
	}
	// Decoded as it arrives: a buffer of the bound up front would cost every member of a large
	// world that much at once.
	var v verdict
	if err := json.NewDecoder(io.LimitReader(conn, maxVerdict(m.WorldSize))).Decode(&v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		if errors.As(err, &se) || errors.As(err, &te) {
			return Result{}, &Error{Python: fmt.Sprintf("RuntimeError: rendezvous at %s: rank 0's answer is not a verdict: %v", m.Address, err)}
		}
		return Result{}, lostRank0(ctx, m, connectBy, cfg.Timeout+verdictGrace, err)
	}
	if v.Hold {
		// Rank 0 refused the barrier and is going down (this member is its own child), or was
		// stopped by a teardown that stops this member too (Config.StoppedWith): it waits to be
		// stopped with it, or gives up when its time runs out.
		conn.Close()
		return Result{}, waitOut(ctx, connectBy.Add(cfg.Timeout+verdictGrace), &Error{Python: v.Error, Missing: v.Missing})
	}
	if !v.OK {
		return Result{}, &Error{Python: v.Error, Missing: v.Missing}
	}
	return Result{Values: v.Values}, nil
}

// waitOut waits until the member is stopped (ctx: its parent ends it) or until deadline, when it
// gives up with err.
func waitOut(ctx context.Context, deadline time.Time, err *Error) error {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return err
	}
}

// maxVerdict bounds rank 0's answer: it carries every member's value (a KV engine_id: ~50 bytes
// with its rank, up to a hello's bound when the user names it), so it grows with the world — a
// 512-worker world spanning 32 DP replicas answers ~25 KiB, far past one hello's bound.
func maxVerdict(world int) int64 { return int64(maxHello) * int64(world+1) }

func dial(ctx context.Context, cfg Config, host, port string) (net.Conn, error) {
	if cfg.Resolve != nil {
		ip, err := cfg.Resolve(ctx, host)
		if err != nil {
			return nil, err
		}
		host = ip
	}
	// A rank 0 whose host is still starting may lose the first SYN (pace.ConnectAttempt): the
	// attempt ends, and join tries again.
	d := net.Dialer{Timeout: pace.ConnectAttempt}
	if ip := net.ParseIP(cfg.ListenIP); ip != nil && !ip.IsUnspecified() {
		// A local host dials from its own address, as a container does from its own, so that a
		// partition between hosts can tell them apart.
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
}

// lostRank0 is a connection to rank 0 that broke (or stayed silent past the bound) before its
// verdict: rank 0 is the member known to be gone.
func lostRank0(ctx context.Context, m Member, connectBy time.Time, wait time.Duration, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if m.Lost != "" {
		// A ZMQ peer: the disconnect is invisible; the member waits for an answer that never comes.
		return waitOut(ctx, connectBy.Add(wait), &Error{Python: m.Lost, Missing: []string{rankName(0)}})
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		// torch's store client raises this when a wait on the master outlives its timeout.
		return &Error{
			Python:  fmt.Sprintf("torch.distributed.DistStoreError: wait timeout after %dms, rendezvous at %s", wait.Milliseconds(), m.Address),
			Missing: []string{rankName(0)},
		}
	}
	return &Error{Python: rank0Gone, Missing: []string{rankName(0)}}
}

// rank0Gone is torch's store client's error when the master closes the connection under it.
const rank0Gone = "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"
