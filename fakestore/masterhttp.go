package fakestore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/widetp/widetp/fakestore/api"
)

func writeJSON(x *exchange, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode response"}`)
	}
	x.Header().Set("Content-Type", "application/json")
	x.WriteHeader(status)
	_, _ = x.Write(b)
}

// writeMasterError answers a request the master plane could not run (bad JSON, unknown op, wrong
// method, oversized body): INVALID_PARAMS with a message saying what was wrong.
func writeMasterError(x *exchange, status int, msg string) {
	x.code = api.InvalidParams
	res := result(api.InvalidParams)
	res.Message = msg
	writeJSON(x, status, res)
}

func urlQuery(r *http.Request) (url.Values, error) { return url.ParseQuery(r.URL.RawQuery) }

// decodeStrict reads a request object, refusing unknown fields (a misspelt field would otherwise
// silently become its zero value) and trailing data.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}

// serveMaster runs POST /master/<Op>: every operation that ran answers HTTP 200 with its result.
func (s *Server) serveMaster(x *exchange, r *http.Request, body []byte) {
	if !strings.HasPrefix(r.URL.Path, api.MasterPathPrefix) {
		writeMasterError(x, http.StatusNotFound, fmt.Sprintf("unknown path %q: master operations are POST %s<Op>", r.URL.Path, api.MasterPathPrefix))
		return
	}
	op := strings.TrimPrefix(r.URL.Path, api.MasterPathPrefix)
	known := false
	for _, o := range api.Ops {
		known = known || o == op
	}
	if !known {
		writeMasterError(x, http.StatusNotFound, fmt.Sprintf("unknown master operation %q (known: %s)", op, strings.Join(api.Ops, ", ")))
		return
	}
	if r.Method != http.MethodPost {
		x.Header().Set("Allow", http.MethodPost)
		writeMasterError(x, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: master operations take POST", r.Method, r.URL.Path))
		return
	}
	peer := x.peer
	switch op {
	case api.OpServiceReady:
		runOp(s, x, op, body, func(struct{}, time.Time) api.ServiceReadyResponse { return s.opServiceReady() })
	case api.OpMountSegment:
		runOp(s, x, op, body, func(req api.MountSegmentRequest, now time.Time) api.Result { return s.opMount(req, peer, now) })
	case api.OpReMountSegment:
		runOp(s, x, op, body, func(req api.ReMountSegmentRequest, now time.Time) api.Result { return s.opReMount(req, peer, now) })
	case api.OpUnmountSegment:
		runOp(s, x, op, body, func(req api.UnmountSegmentRequest, now time.Time) api.Result { return s.opUnmount(req, peer, now) })
	case api.OpPing:
		runOp(s, x, op, body, func(req api.PingRequest, now time.Time) api.PingResponse {
			ignored := s.faults.take(api.FaultIgnorePings, scope{plane: api.PlaneMaster, method: r.Method, op: op,
				key: req.ClientID, peer: peer, client: req.ClientID}, now)
			if ignored != nil {
				x.fault, x.detail = ignored.ID, "ping ignored"
			}
			out := s.opPing(req, peer, now, ignored != nil)
			if out.ErrorCode == api.OK {
				x.detail = strings.TrimSpace(x.detail + " " + out.ClientStatus)
			}
			return out
		})
	case api.OpBatchExistKey:
		runOp(s, x, op, body, s.opBatchExist)
	case api.OpPutStart:
		runOp(s, x, op, body, s.opPutStart)
	case api.OpPutEnd:
		runOp(s, x, op, body, s.opPutEnd)
	case api.OpPutRevoke:
		runOp(s, x, op, body, func(req api.KeyRequest, _ time.Time) api.Result { return s.opPutRevoke(req) })
	case api.OpGetReplicaList:
		runOp(s, x, op, body, s.opGetReplicaList)
	case api.OpRemove:
		runOp(s, x, op, body, s.opRemove)
	case api.OpRemoveAll:
		runOp(s, x, op, body, s.opRemoveAll)
	}
}

// runOp decodes a master operation's request — before taking the server's lock, which a slow or
// malformed body must not hold up — then runs the operation under the lock at the store clock's
// now, and answers HTTP 200 with its result and error code.
func runOp[Req any, Resp interface{ ErrCode() api.Code }](s *Server, x *exchange, op string, body []byte, run func(Req, time.Time) Resp) {
	var req Req
	if err := decodeStrict(body, &req); err != nil {
		writeMasterError(x, http.StatusBadRequest, fmt.Sprintf("decode %s request: %v", op, err))
		return
	}
	s.mu.Lock()
	resp := run(req, s.clock.Now())
	s.mu.Unlock()
	x.code = resp.ErrCode()
	writeJSON(x, http.StatusOK, resp)
}
