package fakestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/report"
)

// The test endpoints, under api.TestPrefix on the admin listener:
//
//	POST   /_widetp/reports        one report.Process (JSON); the latest per id is kept, and all posts
//	GET    /_widetp/reports        the latest record of every process ([]report.Process, by id);
//	                               ?history=1 every post in arrival order
//	POST   /_widetp/nodes          one api.NodeStatus (JSON); the latest per host is kept
//	GET    /_widetp/nodes          the latest status of every node ([]api.NodeStatus, by host)
//	GET    /_widetp/registrations  {"registrations":[...],"duplicates":[...]}
//	GET    /_widetp/events         ?since=<seq>&wait=<duration>: api.EventsResponse, long-polled
//	GET    /_widetp/snapshot       api.Snapshot
//	GET    /_widetp/gate           ?wait=<duration>: api.GateResponse, long-polled until the gate opens
//	POST   /_widetp/gate           open the start gate (api.GateResponse: open)
//	POST   /_widetp/reset          forget everything (state, records, events, faults; closes the gate)
//	POST   /_widetp/sweep          expire clients whose TTL has passed, now
//	GET    /_widetp/faults         active faults
//	POST   /_widetp/faults         add one api.Fault (JSON); answers it with its id (201)
//	DELETE /_widetp/faults         remove all faults, or one with ?id=

func writeTestError(x *exchange, status int, format string, args ...any) {
	x.detail = fmt.Sprintf(format, args...)
	writeJSON(x, status, api.ErrorBody{Error: x.detail})
}

// waitParam reads a long poll's ?wait= (none is 0: answer at once); a bad one is answered 400.
func waitParam(x *exchange, q url.Values) (time.Duration, bool) {
	v := q.Get("wait")
	if v == "" {
		return 0, true
	}
	wait, err := time.ParseDuration(v)
	if err != nil || wait < 0 {
		writeTestError(x, http.StatusBadRequest, "wait=%q: want a duration like 5s", v)
		return 0, false
	}
	return wait, true
}

func (s *Server) serveTest(x *exchange, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, api.TestPrefix)
	x.op = name
	allow := func(methods ...string) bool {
		for _, m := range methods {
			if r.Method == m {
				return true
			}
		}
		x.Header().Set("Allow", strings.Join(methods, ", "))
		writeTestError(x, http.StatusMethodNotAllowed, "%s %s: allowed %s", r.Method, r.URL.Path, strings.Join(methods, ", "))
		return false
	}
	q, err := urlQuery(r)
	if err != nil {
		writeTestError(x, http.StatusBadRequest, "query of %s: %v", r.URL.Path, err)
		return
	}
	switch name {
	case "reports":
		if !allow(http.MethodGet, http.MethodPost) {
			return
		}
		if r.Method == http.MethodGet {
			if q.Get("history") != "" {
				writeJSON(x, http.StatusOK, s.ReportHistory())
				return
			}
			writeJSON(x, http.StatusOK, s.Reports())
			return
		}
		body, _, err := readBody(r, s.cfg.MaxBody)
		if errors.Is(err, errTooLarge) {
			writeTestError(x, http.StatusRequestEntityTooLarge, "report body over %d bytes", s.cfg.MaxBody)
			return
		}
		if err != nil {
			writeTestError(x, http.StatusBadRequest, "read report body: %v", err)
			return
		}
		var p report.Process
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&p); err != nil {
			writeTestError(x, http.StatusBadRequest, "decode report.Process: %v", err)
			return
		}
		if dec.More() {
			writeTestError(x, http.StatusBadRequest, "decode report.Process: trailing data after the object")
			return
		}
		if p.ID == "" {
			writeTestError(x, http.StatusBadRequest, "report.Process has no id")
			return
		}
		x.process, x.key = p.ID, p.ID
		s.mu.Lock()
		n := s.reg.addReport(p)
		s.mu.Unlock()
		writeJSON(x, http.StatusOK, map[string]any{"id": p.ID, "posts": n})
	case "nodes":
		if !allow(http.MethodGet, http.MethodPost) {
			return
		}
		if r.Method == http.MethodGet {
			writeJSON(x, http.StatusOK, s.Nodes())
			return
		}
		body, _, err := readBody(r, s.cfg.MaxBody)
		if err != nil {
			writeTestError(x, http.StatusBadRequest, "read node status body: %v", err)
			return
		}
		var st api.NodeStatus
		if err := decodeStrict(body, &st); err != nil {
			writeTestError(x, http.StatusBadRequest, "decode node status: %v", err)
			return
		}
		if st.Host == "" {
			writeTestError(x, http.StatusBadRequest, "node status has no host")
			return
		}
		x.key = st.Host
		s.mu.Lock()
		s.reg.setNode(st)
		s.mu.Unlock()
		writeJSON(x, http.StatusOK, struct{}{})
	case "registrations":
		if !allow(http.MethodGet) {
			return
		}
		regs, dups := s.Registrations()
		writeJSON(x, http.StatusOK, map[string]any{"registrations": regs, "duplicates": dups})
	case "events":
		if !allow(http.MethodGet) {
			return
		}
		var since uint64
		if v := q.Get("since"); v != "" {
			since, err = strconv.ParseUint(v, 10, 64)
			if err != nil {
				writeTestError(x, http.StatusBadRequest, "since=%q: want a sequence number", v)
				return
			}
		}
		wait, ok := waitParam(x, q)
		if !ok {
			return
		}
		evs, last := s.events.wait(r.Context(), since, wait)
		if evs == nil {
			evs = []api.Event{}
		}
		writeJSON(x, http.StatusOK, api.EventsResponse{Events: evs, LastSeq: last})
	case "snapshot":
		if !allow(http.MethodGet) {
			return
		}
		writeJSON(x, http.StatusOK, s.Snapshot())
	case "reset":
		if !allow(http.MethodPost) {
			return
		}
		s.Reset()
		writeJSON(x, http.StatusOK, struct{}{})
	case "gate":
		if !allow(http.MethodGet, http.MethodPost) {
			return
		}
		if r.Method == http.MethodPost {
			x.detail = "already open"
			if s.OpenGate() {
				x.detail = "opened"
			}
			writeJSON(x, http.StatusOK, api.GateResponse{Open: true})
			return
		}
		wait, ok := waitParam(x, q)
		if !ok {
			return
		}
		writeJSON(x, http.StatusOK, api.GateResponse{Open: s.gate.wait(r.Context(), wait, s.stop)})
	case "sweep":
		if !allow(http.MethodPost) {
			return
		}
		s.Sweep()
		writeJSON(x, http.StatusOK, struct{}{})
	case "faults":
		if !allow(http.MethodGet, http.MethodPost, http.MethodDelete) {
			return
		}
		switch r.Method {
		case http.MethodGet:
			writeJSON(x, http.StatusOK, s.Faults())
		case http.MethodDelete:
			if id := q.Get("id"); id != "" {
				x.key = id
				if !s.RemoveFault(id) {
					writeTestError(x, http.StatusNotFound, "no fault %q", id)
					return
				}
			} else {
				s.faults.clear()
			}
			writeJSON(x, http.StatusOK, struct{}{})
		default:
			body, _, err := readBody(r, s.cfg.MaxBody)
			if err != nil {
				writeTestError(x, http.StatusBadRequest, "read fault body: %v", err)
				return
			}
			var f api.Fault
			if err := decodeStrict(body, &f); err != nil {
				writeTestError(x, http.StatusBadRequest, "decode fault: %v", err)
				return
			}
			added, err := s.AddFault(f)
			if err != nil {
				writeTestError(x, http.StatusBadRequest, "%v", err)
				return
			}
			x.key, x.fault = added.Kind, added.ID
			writeJSON(x, http.StatusCreated, added)
		}
	default:
		writeTestError(x, http.StatusNotFound, "unknown test endpoint %s", r.URL.Path)
	}
}

// AddFault validates and installs a fault; restart and lose-keys act at once (a restart with a
// Duration also refuses every connection for that long: the store is down).
func (s *Server) AddFault(f api.Fault) (api.Fault, error) {
	if err := f.Validate(); err != nil {
		return f, fmt.Errorf("add fault %s: %w", f, err)
	}
	now := s.clock.Now()
	switch f.Kind {
	case api.FaultRestart:
		added := s.faults.add(f, now)
		s.faults.remove(added.ID)
		s.Restart()
		if f.Duration > 0 {
			s.faults.add(api.Fault{Kind: api.FaultRefuse, Plane: f.Plane, Peer: f.Peer, Duration: f.Duration}, now)
		}
		return added, nil
	case api.FaultLoseKeys:
		added := s.faults.add(f, now)
		s.faults.remove(added.ID)
		s.LoseKeys(f.Segment, f.Peer)
		return added, nil
	case api.FaultWipe:
		added := s.faults.add(f, now)
		s.faults.remove(added.ID)
		s.Wipe()
		return added, nil
	}
	added := s.faults.add(f, now)
	s.cfg.Logger.Info("fault added", "fault", added.ID, "spec", added.String())
	return added, nil
}

// Faults lists the active faults.
func (s *Server) Faults() []api.Fault { return s.faults.list(s.clock.Now()) }

// RemoveFault removes one fault by id.
func (s *Server) RemoveFault(id string) bool { return s.faults.remove(id) }

// Restart loses all store state, as a restarted master does: metadata, segments, clients and
// objects. Every client's next Ping answers NEED_REMOUNT. Records and events are kept.
func (s *Server) Restart() {
	s.mu.Lock()
	now := s.clock.Now()
	for _, id := range s.reg.order {
		reg := s.reg.regs[id]
		if reg.Live {
			reg.Live = false
			reg.History = append(reg.History, api.RegistrationEntry{Time: now, Op: "restart", Result: "lost"})
		}
	}
	s.meta = newMetaStore()
	s.m = newMaster(s.m.viewVersion + 1)
	s.mu.Unlock()
	s.cfg.Logger.Info("store restarted")
	s.events.append(api.Event{Time: now, Plane: api.PlaneStore, Op: "restart"})
}

// Wipe loses every metadata key (rpc_meta, ram and the rest) while the master keeps its segments
// and clients: a metadata server that restarted on its own (Mooncake issue #2246). Every Ping
// still answers OK, so no client learns that it should publish again.
func (s *Server) Wipe() {
	s.mu.Lock()
	now := s.clock.Now()
	for _, id := range s.reg.order {
		reg := s.reg.regs[id]
		if reg.Live && reg.Kind != kindSegment {
			reg.Live = false
			reg.History = append(reg.History, api.RegistrationEntry{Time: now, Op: "wipe", Result: "lost"})
		}
	}
	s.meta = newMetaStore()
	s.mu.Unlock()
	s.cfg.Logger.Info("store metadata wiped")
	s.events.append(api.Event{Time: now, Plane: api.PlaneStore, Op: "wipe"})
}

// LoseKeys loses one worker: the rpc_meta and ram keys of its segment name (or of every segment
// name whose keys peer wrote), the segments of that name, and the OK status of their clients, so
// the worker's next Ping answers NEED_REMOUNT.
func (s *Server) LoseKeys(segment, peer string) {
	s.mu.Lock()
	now := s.clock.Now()
	names := map[string]bool{}
	if segment != "" {
		names[segment] = true
	}
	if peer != "" {
		for _, id := range s.reg.order {
			reg := s.reg.regs[id]
			if reg.Live && reg.Writer == peer && reg.Kind != kindMetadata {
				names[reg.Name] = true
			}
		}
	}
	var lost []string
	for name := range names {
		lost = append(lost, s.deleteSegmentKeysLocked(name, "lost", now)...)
		for _, seg := range s.sortedSegments() {
			if seg.seg.Name == name {
				if c := s.m.clients[seg.client]; c != nil {
					c.ok = false
				}
				s.unmountLocked(seg.seg.ID, "", "lost", now)
			}
		}
	}
	s.mu.Unlock()
	sort.Strings(lost)
	s.events.append(api.Event{Time: now, Plane: api.PlaneStore, Op: "lose-keys", Key: segment, Peer: peer,
		Detail: "keys: " + strings.Join(lost, " ")})
}

// OpenGate opens the start gate (api.GateResponse) and reports whether it was closed until now.
func (s *Server) OpenGate() bool { return s.gate.openGate() }

// GateOpen reports whether the start gate is open.
func (s *Server) GateOpen() bool { return s.gate.isOpen() }

// Reset forgets everything: state, registrations, reports, faults and stored events, and closes
// the start gate. Sequence numbers keep growing, so a waiter's since stays meaningful.
func (s *Server) Reset() {
	s.mu.Lock()
	s.meta = newMetaStore()
	s.m = newMaster(s.m.viewVersion + 1)
	s.reg = newRegistry()
	s.mu.Unlock()
	s.faults.clear()
	s.gate.close()
	s.events.reset()
	s.events.append(api.Event{Time: s.clock.Now(), Plane: api.PlaneStore, Op: "reset"})
}

// Reports returns the latest record of every process, by id.
func (s *Server) Reports() []report.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reg.latestReports()
}

// ReportHistory returns every report post in arrival order.
func (s *Server) ReportHistory() []report.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]report.Process{}, s.reg.reportLog...)
}

// Nodes returns the latest status every node posted, by host.
func (s *Server) Nodes() []api.NodeStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reg.nodeList()
}

// Registrations returns every registration and duplicate-name event.
func (s *Server) Registrations() ([]api.Registration, []api.Duplicate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reg.list(), append([]api.Duplicate{}, s.reg.duplicates...)
}

// Events returns the events with Seq > since and the newest sequence number.
func (s *Server) Events(since uint64) ([]api.Event, uint64) { return s.events.since(since) }

// Snapshot returns everything the store knows.
func (s *Server) Snapshot() api.Snapshot {
	evs, last := s.events.since(0)
	faults := s.Faults()
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := api.Snapshot{
		Time: s.clock.Now(), Flavor: string(s.cfg.Flavor), DuplicatePolicy: string(s.cfg.DuplicateSegments),
		ViewVersion: s.m.viewVersion, Metadata: map[string]string{}, Segments: []api.MountedSegment{},
		Clients: []api.ClientState{}, Objects: []api.Object{}, Registrations: s.reg.list(),
		Duplicates: append([]api.Duplicate{}, s.reg.duplicates...), Reports: s.reg.latestReports(),
		ReportHistory: append([]report.Process{}, s.reg.reportLog...), Nodes: s.reg.nodeList(), Faults: faults, Events: evs, LastSeq: last,
	}
	for k, v := range s.meta.values {
		snap.Metadata[k] = string(v)
	}
	for _, seg := range s.sortedSegments() {
		snap.Segments = append(snap.Segments, api.MountedSegment{Segment: seg.seg, ClientID: seg.client, Status: "OK", Used: seg.used})
	}
	for id, c := range s.m.clients {
		snap.Clients = append(snap.Clients, api.ClientState{ID: id, OK: c.ok, Deadline: c.deadline, Heard: c.heard, Peer: c.peer})
	}
	sort.Slice(snap.Clients, func(i, j int) bool { return snap.Clients[i].ID < snap.Clients[j].ID })
	for k, o := range s.m.objects {
		snap.Objects = append(snap.Objects, api.Object{Key: k, ClientID: o.client, Size: o.size,
			Replicas: append([]api.Replica{}, o.replicas...), LeaseUntil: o.leaseUntil})
	}
	sort.Slice(snap.Objects, func(i, j int) bool { return snap.Objects[i].Key < snap.Objects[j].Key })
	return snap
}
