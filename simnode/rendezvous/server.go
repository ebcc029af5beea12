package rendezvous

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// maxHello bounds a member's hello line: a peer that sends more is not a member.
const maxHello = 4096

type arrival struct {
	conn  net.Conn
	hello hello
	err   error // the hello could not be read
}

// serve is rank 0: listen, collect the other ranks, answer them all.
func serve(ctx context.Context, m Member, cfg Config) (Result, error) {
	_, port, _ := net.SplitHostPort(m.Address)
	ln, err := listen(ctx, m, cfg)
	if err != nil {
		return Result{}, &Error{Python: listenError(port, err)}
	}
	return serveOn(ctx, m, cfg, ln)
}

func listen(ctx context.Context, m Member, cfg Config) (net.Listener, error) {
	_, port, _ := net.SplitHostPort(m.Address)
	return (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(cfg.ListenIP, port))
}

// serveOn is rank 0 on a bound listener, which it closes when the barrier ends. The time-out
// runs from here, not from the bind: members that connect earlier wait in the listen backlog.
func serveOn(ctx context.Context, m Member, cfg Config, ln net.Listener) (Result, error) {
	deadline := time.Now().Add(cfg.Timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	arrivals := make(chan arrival)
	departures := make(chan net.Conn)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	// The socket is released before serveOn returns, not whenever the goroutine above gets to run:
	// a caller that binds the address again right after the barrier (a restarted front end, the
	// next barrier of the same address) must find it free, however loaded the machine.
	defer ln.Close()
	go accept(ctx, ln, arrivals, departures)

	members := map[int]net.Conn{}
	ids := map[int]string{0: m.ID}
	values := map[int]string{0: m.Value}
	wants := map[int][]int{} // Member.Want of each member that named the values it reads
	// screenings are rank 0's judgements of the members' hellos, kept for a refusal's answers.
	screenings := map[int]Screening{}
	late := ""
	defer func() {
		for _, c := range members {
			c.Close()
		}
	}()
	write := func(c net.Conn, line []byte) {
		// A member that cannot be written to has gone; it learns nothing either way.
		c.SetWriteDeadline(time.Now().Add(time.Second))
		c.Write(line)
	}
	send := func(c net.Conn, v verdict) { write(c, encodeVerdict(v)) }
	// refuseAll ends the barrier with rank 0's refusal sc: every member that joined is told its own
	// Screening's answer (one that said nothing about itself hears what the refused one does), and
	// so is a refused arrival that never joined (arrival, nil when the refused one is a member).
	refuseAll := func(sc Screening, arrival net.Conn) (Result, error) {
		missing := missingRanks(m.WorldSize, members)
		for r, c := range members {
			answer, ok := screenings[r]
			if !ok {
				answer = Screening{Answer: sc.Answer}
			}
			send(c, verdict{Error: answer.Answer, Hold: answer.Hold, Missing: missing})
		}
		if arrival != nil {
			send(arrival, verdict{Error: sc.Answer, Hold: sc.Hold, Missing: missing})
			arrival.Close()
		}
		return Result{}, &Error{Python: sc.Refuse, Missing: missing}
	}
	for len(members) < m.WorldSize-1 {
		select {
		case a := <-arrivals:
			if a.err != nil {
				a.conn.Close()
				continue
			}
			why := refuse(m, a.hello, members)
			var judged *Screening
			if why != "" && m.Screen != nil && len(a.hello.Hello) > 0 && a.hello.Kind == m.Kind && a.hello.WorldSize != m.WorldSize {
				// vLLM's front end reads an engine's HELLO for its DP index, and knows the engines
				// it waits for, not a world size (wait_for_engine_startup, vllm/v1/engine/utils.py):
				// an engine whose own command gives the handshake another shape is refused for its
				// index when the front end does not wait for it, and is one of rank 0's world when
				// it does.
				sc := m.Screen(a.hello.Hello)
				if sc.Refuse != "" {
					return refuseAll(sc, a.conn)
				}
				h := a.hello
				h.WorldSize = m.WorldSize
				why, judged = refuse(m, h, members), &sc
			}
			if why != "" {
				send(a.conn, verdict{Error: why})
				a.conn.Close()
				continue
			}
			members[a.hello.Rank] = a.conn
			ids[a.hello.Rank] = a.hello.ID
			values[a.hello.Rank] = a.hello.Value
			if a.hello.Want != nil {
				wants[a.hello.Rank] = a.hello.Want
			} else {
				delete(wants, a.hello.Rank)
			}
			if m.Screen == nil || len(a.hello.Hello) == 0 {
				continue
			}
			var sc Screening
			if judged != nil {
				sc = *judged
			} else {
				sc = m.Screen(a.hello.Hello)
			}
			screenings[a.hello.Rank] = sc
			if late == "" {
				late = sc.Late
			}
			if sc.Refuse == "" {
				continue
			}
			return refuseAll(sc, nil)
		case c := <-departures:
			// A member that came and went before the barrier completed is missing again: a
			// process that died in the rendezvous will not take part in what follows it.
			for r, mc := range members {
				if mc == c {
					delete(members, r)
					c.Close()
				}
			}
		case <-ctx.Done():
			missing := missingRanks(m.WorldSize, members)
			if time.Now().Before(deadline) { // cancelled, not timed out
				for r, c := range members {
					if cfg.StoppedWith != nil && cfg.StoppedWith(ids[r]) {
						send(c, verdict{Hold: true, Error: rank0Gone, Missing: []string{rankName(0)}})
					}
				}
				return Result{}, ctx.Err()
			}
			// torch's TCPStore (wait_for_workers) counts the master among the joined.
			py := fmt.Sprintf("torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. %d/%d clients joined.",
				int(cfg.Timeout.Round(time.Second)/time.Second), len(members)+1, m.WorldSize)
			for _, c := range members {
				send(c, verdict{Error: py, Missing: missing})
			}
			return Result{}, &Error{Python: py, Missing: missing}
		}
	}
	// Encoded once for every member that wants every value, and sent in arrival-independent order:
	// the members are waiting all at once.
	var all []byte
	for r, c := range members {
		want, ok := wants[r]
		if !ok {
			if all == nil {
				all = encodeVerdict(verdict{OK: true, Values: values})
			}
			write(c, all)
			continue
		}
		some := make(map[int]string, len(want))
		for _, k := range want {
			if v, ok := values[k]; ok {
				some[k] = v
			}
		}
		write(c, encodeVerdict(verdict{OK: true, Values: some}))
	}
	return Result{Values: values, Late: late, IDs: ids}, nil
}

// accept reads each connection's hello and reports it; after a hello it watches the connection and
// reports its close. Both stop when ctx ends.
func accept(ctx context.Context, ln net.Listener, arrivals chan<- arrival, departures chan<- net.Conn) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			c.SetReadDeadline(deadlineOf(ctx))
			r := bufio.NewReaderSize(c, maxHello)
			line, err := r.ReadSlice('\n')
			var h hello
			if err == nil {
				err = json.Unmarshal(line, &h)
			}
			select {
			case arrivals <- arrival{conn: c, hello: h, err: err}:
			case <-ctx.Done():
				c.Close()
				return
			}
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Time{})
			// A member sends nothing after its hello: any read result means it hung up.
			r.ReadByte()
			select {
			case departures <- c:
			case <-ctx.Done():
			}
		}()
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// missingRanks names the member ranks 1..world-1 that have not joined.
func missingRanks(world int, members map[int]net.Conn) []string {
	missing := []string{}
	for r := 1; r < world; r++ {
		if _, ok := members[r]; !ok {
			missing = append(missing, rankName(r))
		}
	}
	return missing
}

// refuse says why a hello cannot join this barrier ("" when it can).
func refuse(m Member, h hello, members map[int]net.Conn) string {
	switch {
	case h.Kind != m.Kind || h.WorldSize != m.WorldSize:
		return fmt.Sprintf("RuntimeError: rendezvous at %s is %s with world size %d, not %s with world size %d",
			m.Address, m.Kind, m.WorldSize, h.Kind, h.WorldSize)
	case h.Rank <= 0 || h.Rank >= m.WorldSize:
		return fmt.Sprintf("RuntimeError: rendezvous at %s: rank %d is not a member rank of world size %d", m.Address, h.Rank, m.WorldSize)
	case members[h.Rank] != nil:
		return fmt.Sprintf("RuntimeError: rendezvous at %s: rank %d joined twice", m.Address, h.Rank)
	}
	return ""
}

// listenError is torch's TCPStore error for a master that cannot listen.
func listenError(port string, err error) string {
	var errno syscall.Errno
	code, name := 0, "UNKNOWN"
	if errors.As(err, &errno) {
		code = -int(errno)
		switch errno {
		case syscall.EADDRINUSE:
			name = "EADDRINUSE"
		case syscall.EADDRNOTAVAIL:
			name = "EADDRNOTAVAIL"
		case syscall.EACCES:
			name = "EACCES"
		}
	}
	return fmt.Sprintf("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: %s, useIpv6: 0, code: %d, name: %s, message: %v",
		port, code, name, err)
}

// encodeVerdict is v as the line a member reads.
func encodeVerdict(v verdict) []byte {
	b, _ := json.Marshal(v) // bools, strings and a map of them always marshal
	return append(b, '\n')
}
