package fakestore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

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
	decode := func(v any) bool {
		if err := decodeStrict(body, v); err != nil {
			writeMasterError(x, http.StatusBadRequest, fmt.Sprintf("decode %s request: %v", op, err))
			return false
		}
		return true
	}
	var resp any
	var code api.Code
	s.mu.Lock()
	now := s.clock.Now()
	switch op {
	case api.OpServiceReady:
		var req struct{}
		if !decode(&req) {
			s.mu.Unlock()
			return
		}
		out := s.opServiceReady()
		resp, code = out, out.ErrorCode
	case api.OpMountSegment:
		var req api.MountSegmentRequest
		if !decode(&req) {
			s.mu.Unlock()
			return
		}
		out := s.opMount(req, x.peer, now)
		resp, code = out, out.ErrorCode
	case api.OpReMountSegment:
		var req api.ReMountSegmentRequest
		if !decode(&req) {
			s.mu.Unlock()
			return
		}
		out := s.opReMount(req, x.peer, now)
		resp, code = out, out.ErrorCode
	case api.OpUnmountSegment:
		var req api.UnmountSegmentRequest
		if !decode(&req) {
			s.mu.Unlock()
			return
		}
		out := s.opUnmount(req, x.peer, now)
		resp, code = out, out.ErrorCode
	case api.OpPing:
		var req api.PingRequest
		if !decode(&req) {
			s.mu.Unlock()
			return
		}
		ignored := s.faults.take(api.FaultIgnorePings, scope{plane: api.PlaneMaster, method: r.Method, op: op,
			key: req.ClientID, peer: x.peer, client: req.ClientID}, now)
		if ignored != nil {
			x.fault, x.detail = ignored.ID, "ping ignored"
		}
		out := s.opPing(req, x.peer, now, ignored != nil)
		resp, code = out, out.ErrorCode
		if code == api.OK {
			x.detail = strings.TrimSpace(x.detail + " " + out.ClientStatus)
		}
	case api.OpBatchExistKey:
		var req api.KeysRequest
		if !decode(&req) {
			s.mu.Unlock()
			return
		}
		out := s.opBatchExist(req, now)
		resp, code = out, out.ErrorCode
	case api.OpPutStart:
		var req api.PutStartRequest
		if !decode(&req) {
			s.mu.Unlock()
			return
		}
		out := s.opPutStart(req, now)
		resp, code = out, out.ErrorCode
	case api.OpPutEnd, api.OpPutRevoke, api.OpGetReplicaList, api.OpRemove:
		var req api.KeyRequest
		if !decode(&req) {
			s.mu.Unlock()
			return
		}
		switch op {
		case api.OpPutEnd:
			out := s.opPutEnd(req, now)
			resp, code = out, out.ErrorCode
		case api.OpPutRevoke:
			out := s.opPutRevoke(req)
			resp, code = out, out.ErrorCode
		case api.OpGetReplicaList:
			out := s.opGetReplicaList(req, now)
			resp, code = out, out.ErrorCode
		default:
			out := s.opRemove(req, now)
			resp, code = out, out.ErrorCode
		}
	case api.OpRemoveAll:
		var req api.RemoveAllRequest
		if !decode(&req) {
			s.mu.Unlock()
			return
		}
		out := s.opRemoveAll(req, now)
		resp, code = out, out.ErrorCode
	}
	s.mu.Unlock()
	x.code = code
	writeJSON(x, http.StatusOK, resp)
}
