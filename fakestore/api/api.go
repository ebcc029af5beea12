// Package api holds the JSON shapes the fake Mooncake store speaks on its master plane and on its
// test endpoints: the server (package fakestore) and the typed client (package fakestore/client)
// both use these types, so a field cannot drift between the two ends.
//
// The master plane is JSON over HTTP: POST /master/<Op> with the operation's request object,
// answered (HTTP 200 whenever the operation ran) by its response object, which always carries
// error_code (a Mooncake ErrorCode, 0 = OK) and error (the code's name).
package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/widetp/widetp/report"
)

// Plane names a listener of the fake store, and is the scope of events and faults.
type Plane string

const (
	PlaneMetadata Plane = "metadata" // the HTTP metadata server (/metadata?key=)
	PlaneMaster   Plane = "master"   // the master's operations as JSON (/master/<Op>)
	PlaneAdmin    Plane = "admin"    // the master's admin endpoints (/health, /metrics, ...)
	PlaneTest     Plane = "test"     // the fake's own endpoints under TestPrefix (on the admin listener)
	PlaneStore    Plane = "store"    // things the store did by itself (expiry, fault actions)
)

// TestPrefix is the path prefix of the fake's own endpoints; no real Mooncake path starts with it.
const TestPrefix = "/_widetp/"

// MasterPathPrefix is the prefix of the master plane's operation paths: POST /master/<Op>.
const MasterPathPrefix = "/master/"

// Master operation names (the path element after MasterPathPrefix), as in Mooncake's master RPCs.
const (
	OpServiceReady   = "ServiceReady"
	OpMountSegment   = "MountSegment"
	OpReMountSegment = "ReMountSegment"
	OpUnmountSegment = "UnmountSegment"
	OpPing           = "Ping"
	OpBatchExistKey  = "BatchExistKey"
	OpPutStart       = "PutStart"
	OpPutEnd         = "PutEnd"
	OpPutRevoke      = "PutRevoke"
	OpGetReplicaList = "GetReplicaList"
	OpRemove         = "Remove"
	OpRemoveAll      = "RemoveAll"
)

// Ops lists every master operation the fake serves.
var Ops = []string{OpServiceReady, OpMountSegment, OpReMountSegment, OpUnmountSegment, OpPing,
	OpBatchExistKey, OpPutStart, OpPutEnd, OpPutRevoke, OpGetReplicaList, OpRemove, OpRemoveAll}

// Segment is Mooncake's Segment (types.h): a client's registered buffer. ID and client IDs are
// opaque strings here (Mooncake's UUID pair has no wire form outside its binary RPC).
type Segment struct {
	ID         string `json:"id"`
	Name       string `json:"name"` // host:port, the same name as the metadata keys'
	Base       uint64 `json:"base"`
	Size       uint64 `json:"size"`
	TEEndpoint string `json:"te_endpoint"`
	Protocol   string `json:"protocol"`
}

// Result is the part every master response has.
type Result struct {
	ErrorCode Code   `json:"error_code"`
	Error     string `json:"error"`
	// Message explains a request the fake could not run (bad JSON, unknown op); empty otherwise.
	Message string `json:"message,omitempty"`
}

// ErrCode is the operation's error code (OK on success). Every master response embeds Result, so
// the server answers any of them through one path.
func (r Result) ErrCode() Code { return r.ErrorCode }

// Err returns nil for OK, a *CodeError otherwise.
func (r Result) Err(op string) error {
	if r.ErrorCode == OK {
		return nil
	}
	return &CodeError{Op: op, Code: r.ErrorCode, Message: r.Message}
}

// ServiceReadyResponse answers ServiceReady.
type ServiceReadyResponse struct {
	Result
	Ready bool `json:"ready"`
}

// MountSegmentRequest mounts one segment for a client; idempotent per segment id.
type MountSegmentRequest struct {
	ClientID string  `json:"client_id"`
	Segment  Segment `json:"segment"`
}

// ReMountSegmentRequest re-mounts a client's segments after NEED_REMOUNT; it marks the client OK.
type ReMountSegmentRequest struct {
	ClientID string    `json:"client_id"`
	Segments []Segment `json:"segments"`
}

// UnmountSegmentRequest unmounts one segment; idempotent.
type UnmountSegmentRequest struct {
	ClientID  string `json:"client_id"`
	SegmentID string `json:"segment_id"`
}

// PingRequest is a client's heartbeat.
type PingRequest struct {
	ClientID string `json:"client_id"`
}

// Client statuses of a Ping answer (Mooncake's ClientStatus).
const (
	ClientOK          = "OK"
	ClientNeedRemount = "NEED_REMOUNT"
)

// PingResponse answers Ping.
type PingResponse struct {
	Result
	ViewVersion  uint64 `json:"view_version"`
	ClientStatus string `json:"client_status"`
}

// KeysRequest names objects (BatchExistKey).
type KeysRequest struct {
	Keys []string `json:"keys"`
}

// ExistResult is one key's answer in BatchExistKey.
type ExistResult struct {
	ErrorCode Code `json:"error_code"`
	Exists    bool `json:"exists"`
}

// BatchExistKeyResponse answers BatchExistKey, one result per key in request order.
type BatchExistKeyResponse struct {
	Result
	Results []ExistResult `json:"results"`
}

// ReplicateConfig is Mooncake's ReplicateConfig (the fields the fake uses).
type ReplicateConfig struct {
	ReplicaNum       int    `json:"replica_num"`
	PreferredSegment string `json:"preferred_segment,omitempty"`
	WithSoftPin      bool   `json:"with_soft_pin,omitempty"`
}

// PutStartRequest allocates replicas for a new object.
type PutStartRequest struct {
	ClientID    string          `json:"client_id"`
	Key         string          `json:"key"`
	SliceLength uint64          `json:"slice_length"`
	Config      ReplicateConfig `json:"config"`
}

// Replica statuses.
const (
	ReplicaProcessing = "PROCESSING"
	ReplicaComplete   = "COMPLETE"
)

// Replica describes one memory replica: where its bytes live (AllocatedBuffer::Descriptor).
type Replica struct {
	SegmentName       string `json:"segment_name"`
	TransportEndpoint string `json:"transport_endpoint"`
	BufferAddress     uint64 `json:"buffer_address"`
	Size              uint64 `json:"size"`
	Status            string `json:"status"`
}

// ReplicasResponse answers PutStart and GetReplicaList.
type ReplicasResponse struct {
	Result
	Replicas []Replica `json:"replicas"`
	// LeaseTTLMillis is the read lease GetReplicaList granted (0 for PutStart).
	LeaseTTLMillis int64 `json:"lease_ttl_ms,omitempty"`
}

// KeyRequest names one object of one client (PutEnd, PutRevoke, GetReplicaList, Remove).
type KeyRequest struct {
	ClientID string `json:"client_id,omitempty"`
	Key      string `json:"key"`
	// Force skips the lease check of Remove (Mooncake's force flag).
	Force bool `json:"force,omitempty"`
}

// RemoveAllRequest removes every complete object whose lease has expired (all complete ones if Force).
type RemoveAllRequest struct {
	Force bool `json:"force,omitempty"`
}

// RemoveAllResponse answers RemoveAll.
type RemoveAllResponse struct {
	Result
	Removed int64 `json:"removed"`
}

// Event is one entry of the store's append-only event log: a request on some plane, or something
// the store did by itself (PlaneStore: client expiry, a fault's action).
type Event struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Plane  Plane     `json:"plane"`
	Method string    `json:"method,omitempty"` // HTTP method
	Path   string    `json:"path,omitempty"`
	// Op is the master operation, or the store action (expire, restart, lose-keys, reset).
	Op string `json:"op,omitempty"`
	// Key is the metadata key, the master operation's object key, segment name or client id.
	Key  string `json:"key,omitempty"`
	Peer string `json:"peer,omitempty"` // TCP peer IP of the request
	// Status is the HTTP status answered; 0 when the connection was dropped or refused.
	Status int `json:"status"`
	// Code is the Mooncake error code a master operation answered.
	Code Code `json:"code,omitempty"`
	// Process is the report id of a POST /_widetp/reports.
	Process string `json:"process,omitempty"`
	// Fault is the id of the fault that shaped this request.
	Fault  string `json:"fault,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// EventsResponse answers GET /_widetp/events.
type EventsResponse struct {
	Events []Event `json:"events"`
	// LastSeq is the newest sequence number the log has handed out (resume from it).
	LastSeq uint64 `json:"last_seq"`
}

// GateResponse answers GET and POST /_widetp/gate: whether the start gate is open. A harness
// opens it once every host of its run is up; a node configured to wait there starts no process
// before it opens, so that every host's processes start together, however long the runtime took
// to bring the hosts up one after the other.
type GateResponse struct {
	Open bool `json:"open"`
}

// Registration is the history of one registered name: a metadata key (rpc_meta, ram, other) or a
// mounted segment.
type Registration struct {
	// Kind is "rpc_meta", "ram" or "metadata" for metadata keys, "segment" for mounted segments.
	Kind string `json:"kind"`
	// Name is the segment name (host:port) for rpc_meta, ram and segment; the key otherwise.
	Name string `json:"name"`
	// Key is the metadata key, or the segment id of a segment.
	Key string `json:"key"`
	// Client is the master client id that owns a segment.
	Client string `json:"client,omitempty"`
	// Writer is the TCP peer IP of the last accepted write (the container's address).
	Writer     string    `json:"writer"`
	FirstWrite time.Time `json:"first_write"`
	LastWrite  time.Time `json:"last_write"`
	Writes     int       `json:"writes"`
	// Live is true while the key is stored (or the segment mounted).
	Live    bool                `json:"live"`
	History []RegistrationEntry `json:"history"`
}

// RegistrationEntry is one thing that happened to a registration.
type RegistrationEntry struct {
	Time time.Time `json:"time"`
	// Op: put, delete, mount, remount, unmount, expire, lost, restart.
	Op   string `json:"op"`
	Peer string `json:"peer,omitempty"`
	// Result: updated, unchanged, rejected, deleted, not-found, mounted, ...
	Result string `json:"result"`
}

// Duplicate is one attempt to register a name that was already held, and what the store did.
type Duplicate struct {
	Time time.Time `json:"time"`
	// Kind is "rpc_meta" (a metadata PUT of an existing rpc_meta key) or "segment" (a mount of a
	// segment name another client holds).
	Kind string `json:"kind"`
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
	// Holder is who held the name (peer IP, or client id for a segment); Peer and Client: who asked.
	Holder string `json:"holder"`
	Peer   string `json:"peer"`
	Client string `json:"client,omitempty"`
	// Action: "unchanged" (same value, 200), "rejected" or "accepted".
	Action string `json:"action"`
}

// MountedSegment is a segment the master holds.
type MountedSegment struct {
	Segment
	ClientID string `json:"client_id"`
	Status   string `json:"status"`
	Used     uint64 `json:"used"`
}

// ClientState is the master's view of one client.
type ClientState struct {
	ID string `json:"id"`
	// OK is true once the client remounted (Mooncake's ok_client_ set): Ping then answers OK.
	OK bool `json:"ok"`
	// Deadline is when the client expires unless it pings again (zero when not monitored).
	Deadline time.Time `json:"deadline"`
	// Heard is when the master last heard from the client: its mount or the last Ping that kept it
	// alive (an ignored Ping does not count).
	Heard time.Time `json:"heard"`
	Peer  string    `json:"peer"`
}

// Object is a stored object's metadata.
type Object struct {
	Key        string    `json:"key"`
	ClientID   string    `json:"client_id"`
	Size       uint64    `json:"size"`
	Replicas   []Replica `json:"replicas"`
	LeaseUntil time.Time `json:"lease_until"`
}

// Snapshot is everything the store knows, for a run's artifacts.
type Snapshot struct {
	Time            time.Time         `json:"time"`
	Flavor          string            `json:"flavor"`
	DuplicatePolicy string            `json:"duplicate_segments"`
	ViewVersion     uint64            `json:"view_version"`
	Metadata        map[string]string `json:"metadata"`
	Segments        []MountedSegment  `json:"segments"`
	Clients         []ClientState     `json:"clients"`
	Objects         []Object          `json:"objects"`
	Registrations   []Registration    `json:"registrations"`
	Duplicates      []Duplicate       `json:"duplicates"`
	Reports         []report.Process  `json:"reports"`
	ReportHistory   []report.Process  `json:"report_history"`
	Faults          []Fault           `json:"faults"`
	Events          []Event           `json:"events"`
	LastSeq         uint64            `json:"last_seq"`
	// Nodes is the latest status every simulated node posted, by host.
	Nodes []NodeStatus `json:"nodes"`
}

// NodeStatus is what a simulated node's supervisor says of its processes as a whole (POST
// /_widetp/nodes): a harness waits on these, not on a list of processes it expects, so that a run
// that differs from any prediction still ends and shows how it differs.
type NodeStatus struct {
	Host string `json:"host"`
	// Settled is true when nothing more happens on the node by itself: every process that started
	// is ready or has exited, none that could still start will, and no process is about to react
	// to a child's failure.
	Settled bool `json:"settled"`
	// Processes counts the processes that reported so far; Ready the live ones that finished
	// their start-up; Exited the ones that ended.
	Processes int `json:"processes"`
	Ready     int `json:"ready"`
	Exited    int `json:"exited"`
	// Pending names the processes that keep the node from settling (at most a few), for a
	// harness's time-out message.
	Pending []string `json:"pending,omitempty"`
	// Seq counts the node's posts, so that a reader can tell a newer status from an older one.
	Seq int `json:"seq"`
	// Boot tells the node program's runs apart (its start time, Unix nanoseconds): a node that
	// restarted counts its Seq from 1 again, and its statuses replace those of the run before.
	Boot int64 `json:"boot,omitempty"`
	// Acts counts the control requests (`widetp node ctl`: kill or restart one process) the node
	// program carried out in this run; a status with Acts >= n was derived after the n-th.
	Acts int `json:"acts,omitempty"`
}

// Fault kinds.
const (
	FaultLatency     = "latency"      // delay the answer by Latency
	FaultDrop        = "drop"         // close the connection without answering
	FaultRefuse      = "refuse"       // reset connections from the scope as they arrive
	FaultStatus      = "status"       // answer Status (metadata/admin) or Code (master) with the real body
	FaultRestart     = "restart"      // lose all state now (clients then see NEED_REMOUNT)
	FaultLoseKeys    = "lose-keys"    // lose one worker's keys and mount now (by Segment or Peer)
	FaultWipe        = "wipe"         // lose every metadata key now; the master keeps its clients
	FaultIgnorePings = "ignore-pings" // pings of Client (or from Peer) do not keep it alive
)

// FaultKinds lists every fault kind.
var FaultKinds = []string{FaultLatency, FaultDrop, FaultRefuse, FaultStatus, FaultRestart, FaultLoseKeys, FaultIgnorePings, FaultWipe}

// Fault is one injected failure. Scope fields left empty match everything. A fault with Count
// shapes that many matching requests; with Duration it lasts that long; with neither it lasts
// until deleted. Restart and lose-keys act once, when set.
type Fault struct {
	ID   string `json:"id,omitempty"`
	Kind string `json:"kind"`

	Plane Plane `json:"plane,omitempty"`
	// Method is an HTTP method (GET, PUT, ...) or a master operation name (Ping, MountSegment).
	Method string `json:"method,omitempty"`
	// Key is a glob (see Glob: * spans slashes) over the request's key: metadata key, object
	// key, segment name or client id.
	Key  string `json:"key,omitempty"`
	Peer string `json:"peer,omitempty"` // TCP peer IP

	Count    int      `json:"count,omitempty"`
	Duration Duration `json:"duration,omitempty"`

	Latency Duration `json:"latency,omitempty"`
	Status  int      `json:"status,omitempty"`
	Code    Code     `json:"code,omitempty"`
	// Body replaces the real body a status fault answers with.
	Body    string `json:"body,omitempty"`
	Segment string `json:"segment,omitempty"` // lose-keys: the worker's segment name
	Client  string `json:"client,omitempty"`  // ignore-pings: the client id

	// Hits counts the requests this fault shaped; Expires is when a Duration fault ends.
	Hits    int       `json:"hits"`
	Expires time.Time `json:"expires,omitempty"`
}

// String renders a fault in the flag syntax (ParseFault's inverse).
func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kind=%s", f.Kind)
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, ",%s=%s", k, v)
		}
	}
	add("plane", string(f.Plane))
	add("method", f.Method)
	add("key", f.Key)
	add("peer", f.Peer)
	if f.Count != 0 {
		add("count", fmt.Sprint(f.Count))
	}
	if f.Duration != 0 {
		add("duration", f.Duration.String())
	}
	if f.Latency != 0 {
		add("latency", f.Latency.String())
	}
	if f.Status != 0 {
		add("status", fmt.Sprint(f.Status))
	}
	if f.Code != 0 {
		add("code", fmt.Sprint(int32(f.Code)))
	}
	add("body", f.Body)
	add("segment", f.Segment)
	add("client", f.Client)
	return b.String()
}

// Duration is a time.Duration that reads and writes JSON as "1.5s" (a number is nanoseconds).
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "250ms" or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration %s: want a string like \"250ms\" or nanoseconds", b)
	}
	*d = Duration(n)
	return nil
}

// ErrorBody is the JSON body of a test endpoint's 4xx/5xx answer.
type ErrorBody struct {
	Error string `json:"error"`
}
