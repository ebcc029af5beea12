// Package fakestore is a fake Mooncake store for simulated vLLM workers and for the tests that
// watch them: it replaces Mooncake's master and its HTTP metadata server, speaks their protocols,
// and records who registered what, when and from where, so a test can wait on events instead of
// sleeping and can break the store on purpose.
//
// # Planes
//
// A Server listens on three TCP ports:
//
//   - metadata (default :8080): the HTTP metadata server, GET/PUT/DELETE /metadata?key=<key>,
//     byte-compatible with one of three real servers chosen by Config.Flavor: cpp (the server
//     inside mooncake_master, also GET /health), python (the wheel's
//     mooncake_http_metadata_server) or go (the transfer engine's example). Statuses, bodies and
//     Content-Type headers are those of the real code, including the rpc_meta duplicate rule.
//   - master (default :50052, never 50051): the master's operations as JSON over HTTP,
//     POST /master/<Op> with the shapes of package fakestore/api. Every operation that ran
//     answers 200 with {"error_code": <Mooncake ErrorCode>, "error": "<name>", ...}; a request
//     that could not run (bad JSON, unknown field or operation, wrong method, oversized body)
//     answers 4xx with error_code -600 INVALID_PARAMS and a message. Semantics follow
//     master_service.cpp: MountSegment is idempotent per segment id; the first Ping after a mount
//     answers NEED_REMOUNT until ReMountSegment; a client that does not ping for ClientTTL
//     expires: its segments are unmounted and the rpc_meta/ram metadata keys of their names are
//     deleted; GetReplicaList and BatchExistKey grant a read lease of LeaseTTL, during which
//     Remove answers -706 OBJECT_HAS_LEASE.
//   - admin (default :9003): the master's admin endpoints in their real formats (/health,
//     /metrics, /get_all_segments, /get_segments_detail, /get_all_keys, /query_key), and the
//     fake's own test endpoints under /_widetp/ (a prefix no real path uses): process reports,
//     registrations, the long-pollable event log, snapshot, reset and faults (see testapi.go).
//
// # Master JSON shapes
//
//	ServiceReady    {}                                            -> {error_code, error, ready}
//	MountSegment    {client_id, segment:{id,name,base,size,te_endpoint,protocol}} -> {error_code, error}
//	ReMountSegment  {client_id, segments:[segment...]}            -> {error_code, error}
//	UnmountSegment  {client_id, segment_id}                       -> {error_code, error}
//	Ping            {client_id}                                   -> {error_code, error, view_version, client_status: OK|NEED_REMOUNT}
//	BatchExistKey   {keys:[...]}                                  -> {error_code, error, results:[{error_code, exists}]}
//	PutStart        {client_id, key, slice_length, config:{replica_num, preferred_segment, with_soft_pin}}
//	                                                              -> {error_code, error, replicas:[{segment_name, transport_endpoint, buffer_address, size, status}]}
//	PutEnd          {client_id, key}                              -> {error_code, error}
//	PutRevoke       {client_id, key}                              -> {error_code, error}
//	GetReplicaList  {key}                                         -> {error_code, error, replicas, lease_ttl_ms}
//	Remove          {key, force}                                  -> {error_code, error}
//	RemoveAll       {force}                                       -> {error_code, error, removed}
//
// Error codes are Mooncake's: -704 OBJECT_NOT_FOUND, -705 OBJECT_ALREADY_EXISTS, -706
// OBJECT_HAS_LEASE, -703 REPLICA_IS_NOT_READY, -601 ILLEGAL_CLIENT, -700 INVALID_WRITE, -200
// NO_AVAILABLE_HANDLE, -600 INVALID_PARAMS (also a duplicate segment name under
// RejectDuplicates, as the newer master's name-ownership check answers).
//
// Time: TTLs, leases and fault durations read Config.Clock; with a ManualClock a test advances
// the clock and calls Server.Sweep (or POST /_widetp/sweep) instead of sleeping.
package fakestore
