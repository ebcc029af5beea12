package fakestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
)

// request builds a request from fuzzed parts, or nil when they do not form one a client could send.
func request(method, target string, body []byte) *http.Request {
	if method == "" || strings.ContainsAny(method, " \t\r\n()<>@,;:\\\"/[]?={}") || !strings.HasPrefix(target, "/") {
		return nil
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_ = cancel // released when the deadline passes; the handler must not outlive it
	r, err := http.NewRequestWithContext(ctx, method, "http://store"+u.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil
	}
	r.RemoteAddr = "192.0.2.7:40000"
	return r
}

func fuzzServer(t *testing.T, cfg fakestore.Config) *fakestore.Server {
	s, err := fakestore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzMetadataPlane: whatever arrives, every flavor answers with one of its real statuses, never
// panics, and a PUT that was accepted is readable back.
func FuzzMetadataPlane(f *testing.F) {
	for _, seed := range []struct {
		flavor         uint8
		method, target string
		body           []byte
	}{
		{0, "PUT", "/metadata?key=mooncake%2Frpc_meta%2Fh%3A1", []byte(`{"rpc_port":1}`)},
		{1, "GET", "/metadata?key=%20", nil},
		{2, "DELETE", "/metadata", nil},
		{0, "POST", "/health", []byte("x")},
		{1, "PATCH", "/metadata?key=a&key=b", nil},
		{2, "GET", "/metadata/?key=%zz", nil},
		{0, "PUT", "/metadata?key=rpc_meta", bytes.Repeat([]byte("x"), 300)},
	} {
		f.Add(seed.flavor, seed.method, seed.target, seed.body)
	}
	flavors := []fakestore.Flavor{fakestore.FlavorCPP, fakestore.FlavorPython, fakestore.FlavorGo}
	allowed := []int{200, 301, 307, 400, 404, 405, 413, 507}
	f.Fuzz(func(t *testing.T, fl uint8, method, target string, body []byte) {
		r := request(method, target, body)
		if r == nil {
			return
		}
		s := fuzzServer(t, fakestore.Config{Flavor: flavors[int(fl)%3], MaxBody: 256})
		w := httptest.NewRecorder()
		s.Handler(api.PlaneMetadata).ServeHTTP(w, r)
		if !slices.Contains(allowed, w.Code) {
			t.Fatalf("%s %s: status %d is none a real server sends", method, target, w.Code)
		}
		if method == http.MethodPut && w.Code == 200 && r.URL.Path == "/metadata" {
			key := r.URL.Query().Get("key")
			got := httptest.NewRecorder()
			s.Handler(api.PlaneMetadata).ServeHTTP(got, request("GET", "/metadata?key="+url.QueryEscape(key), nil))
			if got.Code != 200 || !bytes.Equal(got.Body.Bytes(), body) {
				t.Fatalf("accepted PUT of %q not readable back: %d %q", key, got.Code, got.Body.Bytes())
			}
		}
	})
}

// FuzzMasterPlane: every answer is a JSON Result; a 200 carries a known Mooncake code, anything
// else INVALID_PARAMS with a message.
func FuzzMasterPlane(f *testing.F) {
	for _, seed := range []struct {
		op   string
		body []byte
	}{
		{"Ping", []byte(`{"client_id":"c"}`)},
		{"MountSegment", []byte(`{"client_id":"c","segment":{"id":"s","name":"h:1","base":1,"size":1}}`)},
		{"PutStart", []byte(`{"client_id":"c","key":"k","slice_length":1,"config":{"replica_num":1}}`)},
		{"RemoveAll", []byte(`{"force":true}`)},
		{"BatchExistKey", []byte(`{"keys":["a",""]}`)},
		{"Nope", []byte(`{}`)},
		{"Ping", []byte(`{"client_id":`)},
		{"ReMountSegment", []byte(`{"segments":[{"id":""}]}`)},
	} {
		f.Add(seed.op, seed.body)
	}
	f.Fuzz(func(t *testing.T, op string, body []byte) {
		r := request(http.MethodPost, "/master/"+url.PathEscape(op), body)
		if r == nil {
			return
		}
		s := fuzzServer(t, fakestore.Config{MaxBody: 1024})
		w := httptest.NewRecorder()
		s.Handler(api.PlaneMaster).ServeHTTP(w, r)
		var res api.Result
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
			t.Fatalf("answer %q is not JSON: %v", w.Body.Bytes(), err)
		}
		switch {
		case w.Code == 200 && res.ErrorCode.String() == "UNKNOWN_ERROR":
			t.Fatalf("200 with unknown code %d", res.ErrorCode)
		case w.Code != 200 && (res.ErrorCode != api.InvalidParams || res.Message == ""):
			t.Fatalf("%d answer without INVALID_PARAMS and a message: %+v", w.Code, res)
		case !slices.Contains([]int{200, 400, 404, 405, 413}, w.Code):
			t.Fatalf("status %d", w.Code)
		}
	})
}

// FuzzTestPlane: the test endpoints answer JSON with a 2xx/4xx status to anything, within the
// request's deadline (a fuzzed long poll must not hang).
func FuzzTestPlane(f *testing.F) {
	for _, seed := range []struct {
		method, target string
		body           []byte
	}{
		{"POST", "/_widetp/reports", []byte(`{"id":"h/0/worker-0","rank":0}`)},
		{"GET", "/_widetp/events?since=0&wait=1h", nil},
		{"POST", "/_widetp/faults", []byte(`{"kind":"latency","latency":"5ms"}`)},
		{"DELETE", "/_widetp/faults?id=f1", nil},
		{"POST", "/_widetp/reset", nil},
		{"GET", "/_widetp/snapshot", nil},
		{"POST", "/_widetp/faults", []byte(`{"kind":"restart","duration":"1s"}`)},
		{"GET", "/_widetp/events?since=-1", nil},
	} {
		f.Add(seed.method, seed.target, seed.body)
	}
	f.Fuzz(func(t *testing.T, method, target string, body []byte) {
		r := request(method, "/_widetp/"+strings.TrimPrefix(target, "/_widetp/"), body)
		if r == nil {
			return
		}
		s := fuzzServer(t, fakestore.Config{MaxBody: 1024})
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Handler(api.PlaneAdmin).ServeHTTP(w, r)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %s did not answer within 5s of a 100ms deadline", method, target)
		}
		if !json.Valid(w.Body.Bytes()) || !slices.Contains([]int{200, 201, 400, 404, 405, 413}, w.Code) {
			t.Fatalf("%s %s = %d %q", method, target, w.Code, w.Body.Bytes())
		}
	})
}
