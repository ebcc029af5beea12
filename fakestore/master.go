package fakestore

import (
	"sort"
	"time"

	"github.com/widetp/widetp/fakestore/api"
)

// This file is the master's semantics (mooncake-store/src/master_service.cpp, segment.cpp),
// independent of the JSON plane that carries them. Every method runs under Server.mu.

type mountedSegment struct {
	seg    api.Segment
	client string
	used   uint64
}

type clientState struct {
	// ok mirrors Mooncake's ok_client_ set: only ReMountSegment adds a client to it, so the first
	// Ping after a MountSegment answers NEED_REMOUNT.
	ok       bool
	deadline time.Time
	// heard is when the master last heard the client (a mount or a ping that kept it alive).
	heard time.Time
	peer  string
}

type object struct {
	client   string
	size     uint64
	replicas []api.Replica
	// segIDs[i] is the id of the segment replicas[i] lives on (names may repeat across segments).
	segIDs     []string
	leaseUntil time.Time
	putStart   time.Time
}

func (o *object) hasComplete() bool {
	for _, r := range o.replicas {
		if r.Status == api.ReplicaComplete {
			return true
		}
	}
	return false
}

func (o *object) allComplete() bool {
	for _, r := range o.replicas {
		if r.Status != api.ReplicaComplete {
			return false
		}
	}
	return true
}

type opCounter struct{ requests, failures int64 }

type master struct {
	segments    map[string]*mountedSegment // by segment id
	clients     map[string]*clientState
	objects     map[string]*object
	viewVersion uint64
	counters    map[string]*opCounter // by metric stem (put_start, ping, ...)
}

func newMaster(viewVersion uint64) *master {
	return &master{
		segments:    map[string]*mountedSegment{},
		clients:     map[string]*clientState{},
		objects:     map[string]*object{},
		viewVersion: viewVersion,
		counters:    map[string]*opCounter{},
	}
}

// count records one request of a metric stem and whether it failed (MasterMetricManager's
// *_requests_total and *_failures_total).
func (m *master) count(stem string, failed bool) {
	c := m.counters[stem]
	if c == nil {
		c = &opCounter{}
		m.counters[stem] = c
	}
	c.requests++
	if failed {
		c.failures++
	}
}

// touch is Mooncake's push onto client_ping_queue_: the client's TTL restarts from now.
func (s *Server) touch(id, peer string, now time.Time) *clientState {
	c := s.m.clients[id]
	if c == nil {
		c = &clientState{}
		s.m.clients[id] = c
	}
	c.deadline = now.Add(s.cfg.ClientTTL)
	c.heard = now
	c.peer = peer
	return c
}

func (s *Server) activeClients() int {
	n := 0
	for _, c := range s.m.clients {
		if c.ok {
			n++
		}
	}
	return n
}

// mountLocked is ScopedSegmentAccess::MountSegment plus the duplicate-name policy.
func (s *Server) mountLocked(client string, seg api.Segment, peer, op string, now time.Time) api.Code {
	if seg.ID == "" || seg.Base == 0 || seg.Size == 0 {
		return api.InvalidParams
	}
	if _, ok := s.m.segments[seg.ID]; ok {
		return api.SegmentAlreadyExists
	}
	for _, other := range s.sortedSegments() {
		if other.seg.Name != seg.Name || other.client == client {
			continue
		}
		d := api.Duplicate{Time: now, Kind: kindSegment, Name: seg.Name, Key: seg.ID, Holder: other.client,
			Peer: peer, Client: client}
		if s.cfg.DuplicateSegments == RejectDuplicates {
			d.Action = "rejected"
			s.reg.duplicates = append(s.reg.duplicates, d)
			s.reg.note(kindSegment, seg.ID, seg.Name, peer, op, "rejected-duplicate-name", false, now)
			return api.InvalidParams
		}
		d.Action = "accepted"
		s.reg.duplicates = append(s.reg.duplicates, d)
		break
	}
	s.m.segments[seg.ID] = &mountedSegment{seg: seg, client: client}
	reg := s.reg.write(kindSegment, seg.ID, seg.Name, peer, op, "mounted", now)
	reg.Client = client
	return api.OK
}

// unmountLocked removes a segment and every replica on it (ClearInvalidHandles); reason goes to
// the registration history.
func (s *Server) unmountLocked(id, peer, reason string, now time.Time) {
	seg, ok := s.m.segments[id]
	if !ok {
		return
	}
	delete(s.m.segments, id)
	s.reg.note(kindSegment, id, seg.seg.Name, peer, reason, "unmounted", false, now)
	for key, o := range s.m.objects {
		var reps []api.Replica
		var ids []string
		for i, r := range o.replicas {
			if o.segIDs[i] != id {
				reps, ids = append(reps, r), append(ids, o.segIDs[i])
			}
		}
		o.replicas, o.segIDs = reps, ids
		if len(o.replicas) == 0 {
			delete(s.m.objects, key)
		}
	}
}

func (s *Server) sortedSegments() []*mountedSegment {
	out := make([]*mountedSegment, 0, len(s.m.segments))
	for _, seg := range s.m.segments {
		out = append(out, seg)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].seg.Name != out[j].seg.Name {
			return out[i].seg.Name < out[j].seg.Name
		}
		return out[i].seg.ID < out[j].seg.ID
	})
	return out
}

func (s *Server) opServiceReady() api.ServiceReadyResponse {
	return api.ServiceReadyResponse{Result: result(api.OK), Ready: true}
}

func (s *Server) opMount(req api.MountSegmentRequest, peer string, now time.Time) api.Result {
	if req.ClientID == "" {
		s.m.count("mount_segment", true)
		return result(api.InvalidParams)
	}
	s.touch(req.ClientID, peer, now)
	code := s.mountLocked(req.ClientID, req.Segment, peer, "mount", now)
	if code == api.SegmentAlreadyExists {
		// MasterService::MountSegment: an existing segment id is an idempotent success.
		code = api.OK
	}
	s.m.count("mount_segment", code != api.OK)
	return result(code)
}

func (s *Server) opReMount(req api.ReMountSegmentRequest, peer string, now time.Time) api.Result {
	if req.ClientID == "" {
		s.m.count("remount_segment", true)
		return result(api.InvalidParams)
	}
	if c := s.m.clients[req.ClientID]; c != nil && c.ok {
		// Already remounted: idempotent, nothing to do (MasterService::ReMountSegment).
		s.m.count("remount_segment", false)
		return result(api.OK)
	}
	c := s.touch(req.ClientID, peer, now)
	for _, seg := range req.Segments {
		// ScopedSegmentAccess::ReMountSegment ignores SEGMENT_ALREADY_EXISTS and INVALID_PARAMS.
		s.mountLocked(req.ClientID, seg, peer, "remount", now)
	}
	c.ok = true
	s.m.count("remount_segment", false)
	return result(api.OK)
}

func (s *Server) opUnmount(req api.UnmountSegmentRequest, peer string, now time.Time) api.Result {
	// Unknown ids are an idempotent success (MasterService::UnmountSegment).
	s.unmountLocked(req.SegmentID, peer, "unmount", now)
	s.m.count("unmount_segment", false)
	return result(api.OK)
}

func (s *Server) opPing(req api.PingRequest, peer string, now time.Time, ignored bool) api.PingResponse {
	if req.ClientID == "" {
		s.m.count("ping", true)
		return api.PingResponse{Result: result(api.InvalidParams)}
	}
	status := api.ClientNeedRemount
	c := s.m.clients[req.ClientID]
	if c != nil && c.ok {
		status = api.ClientOK
	}
	if !ignored {
		s.touch(req.ClientID, peer, now)
	}
	s.m.count("ping", false)
	return api.PingResponse{Result: result(api.OK), ViewVersion: s.m.viewVersion, ClientStatus: status}
}

func (s *Server) opBatchExist(req api.KeysRequest, now time.Time) api.BatchExistKeyResponse {
	out := api.BatchExistKeyResponse{Result: result(api.OK), Results: make([]api.ExistResult, len(req.Keys))}
	for i, k := range req.Keys {
		if o, ok := s.m.objects[k]; ok && o.hasComplete() {
			// ExistKey grants a lease: the client may read the object next.
			o.leaseUntil = now.Add(s.cfg.LeaseTTL)
			out.Results[i].Exists = true
		}
	}
	s.m.count("batch_exist_key", false)
	return out
}

func (s *Server) opPutStart(req api.PutStartRequest, now time.Time) api.ReplicasResponse {
	fail := func(c api.Code) api.ReplicasResponse {
		s.m.count("put_start", true)
		return api.ReplicasResponse{Result: result(c)}
	}
	if req.Config.ReplicaNum <= 0 || req.Key == "" || req.SliceLength == 0 {
		return fail(api.InvalidParams)
	}
	if o, ok := s.m.objects[req.Key]; ok {
		if o.hasComplete() || !o.putStart.Add(putStartDiscardTimeout).Before(now) {
			return fail(api.ObjectAlreadyExists)
		}
		delete(s.m.objects, req.Key)
	}
	var chosen []*mountedSegment
	free := func(seg *mountedSegment) bool { return seg.seg.Size-seg.used >= req.SliceLength }
	segs := s.sortedSegments()
	if req.Config.PreferredSegment != "" {
		for _, seg := range segs {
			if seg.seg.Name == req.Config.PreferredSegment && free(seg) {
				chosen = append(chosen, seg)
				break
			}
		}
	}
	for _, seg := range segs {
		if len(chosen) >= req.Config.ReplicaNum {
			break
		}
		if free(seg) && (len(chosen) == 0 || chosen[0] != seg) {
			chosen = append(chosen, seg)
		}
	}
	if len(chosen) < req.Config.ReplicaNum {
		return fail(api.NoAvailableHandle)
	}
	o := &object{client: req.ClientID, size: req.SliceLength, putStart: now}
	for _, seg := range chosen {
		o.replicas = append(o.replicas, api.Replica{SegmentName: seg.seg.Name, TransportEndpoint: seg.seg.TEEndpoint,
			BufferAddress: seg.seg.Base + seg.used, Size: req.SliceLength, Status: api.ReplicaProcessing})
		o.segIDs = append(o.segIDs, seg.seg.ID)
		seg.used += req.SliceLength
	}
	s.m.objects[req.Key] = o
	s.m.count("put_start", false)
	return api.ReplicasResponse{Result: result(api.OK), Replicas: append([]api.Replica(nil), o.replicas...)}
}

func (s *Server) opPutEnd(req api.KeyRequest, now time.Time) api.Result {
	o, ok := s.m.objects[req.Key]
	switch {
	case !ok:
		s.m.count("put_end", true)
		return result(api.ObjectNotFound)
	case o.client != req.ClientID:
		s.m.count("put_end", true)
		return result(api.IllegalClient)
	}
	for i := range o.replicas {
		o.replicas[i].Status = api.ReplicaComplete
	}
	// GrantLease(0, ...): a finished put holds no lease.
	o.leaseUntil = now
	s.m.count("put_end", false)
	return result(api.OK)
}

func (s *Server) opPutRevoke(req api.KeyRequest) api.Result {
	o, ok := s.m.objects[req.Key]
	switch {
	case !ok:
		s.m.count("put_revoke", true)
		return result(api.ObjectNotFound)
	case o.client != req.ClientID:
		s.m.count("put_revoke", true)
		return result(api.IllegalClient)
	}
	for _, r := range o.replicas {
		if r.Status != api.ReplicaProcessing {
			s.m.count("put_revoke", true)
			return result(api.InvalidWrite)
		}
	}
	delete(s.m.objects, req.Key)
	s.m.count("put_revoke", false)
	return result(api.OK)
}

func (s *Server) opGetReplicaList(req api.KeyRequest, now time.Time) api.ReplicasResponse {
	o, ok := s.m.objects[req.Key]
	if !ok {
		s.m.count("get_replica_list", true)
		return api.ReplicasResponse{Result: result(api.ObjectNotFound)}
	}
	var reps []api.Replica
	for _, r := range o.replicas {
		if r.Status == api.ReplicaComplete {
			reps = append(reps, r)
		}
	}
	if len(reps) == 0 {
		s.m.count("get_replica_list", true)
		return api.ReplicasResponse{Result: result(api.ReplicaIsNotReady)}
	}
	// The read lease keeps the object from being removed while the client reads it.
	o.leaseUntil = now.Add(s.cfg.LeaseTTL)
	s.m.count("get_replica_list", false)
	return api.ReplicasResponse{Result: result(api.OK), Replicas: reps, LeaseTTLMillis: s.cfg.LeaseTTL.Milliseconds()}
}

func (s *Server) opRemove(req api.KeyRequest, now time.Time) api.Result {
	o, ok := s.m.objects[req.Key]
	code := api.OK
	switch {
	case !ok:
		code = api.ObjectNotFound
	case !req.Force && now.Before(o.leaseUntil):
		code = api.ObjectHasLease
	case !o.allComplete():
		code = api.ReplicaIsNotReady
	default:
		delete(s.m.objects, req.Key)
	}
	s.m.count("remove", code != api.OK)
	return result(code)
}

func (s *Server) opRemoveAll(req api.RemoveAllRequest, now time.Time) api.RemoveAllResponse {
	var n int64
	for k, o := range s.m.objects {
		if o.allComplete() && (req.Force || !now.Before(o.leaseUntil)) {
			delete(s.m.objects, k)
			n++
		}
	}
	s.m.count("remove_all", false)
	return api.RemoveAllResponse{Result: result(api.OK), Removed: n}
}

// expireLocked is ClientMonitorFunc's cleanup plus the HTTP metadata server's: every client whose
// deadline passed loses its OK status and its segments, and the metadata keys of those segment
// names are deleted. It returns the expired clients and their segment names.
func (s *Server) expireLocked(now time.Time) map[string][]string {
	expired := map[string][]string{}
	for id, c := range s.m.clients {
		if !c.deadline.Before(now) {
			continue
		}
		var names []string
		for _, seg := range s.sortedSegments() {
			if seg.client == id {
				names = append(names, seg.seg.Name)
				s.unmountLocked(seg.seg.ID, c.peer, "expire", now)
			}
		}
		delete(s.m.clients, id)
		for _, name := range names {
			s.deleteSegmentKeysLocked(name, "expire", now)
		}
		expired[id] = names
	}
	return expired
}

func result(c api.Code) api.Result { return api.Result{ErrorCode: c, Error: c.String()} }
