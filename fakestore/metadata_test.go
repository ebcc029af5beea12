package fakestore_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
)

// noCT marks a response that must carry no Content-Type header at all (coro_http adds none
// unless the handler does).
const noCT = "<none>"

// exchangeRow is one request of a conformance sequence and the exact answer the real server
// gives. Rows run in order against one server: later rows see earlier rows' writes.
type exchangeRow struct {
	name     string
	method   string
	target   string // path and query
	body     string
	status   int
	respBody string
	ct       string // exact Content-Type, or noCT
	location string // exact Location header, when set
}

const (
	rpcKey  = "/metadata?key=mooncake%2Frpc_meta%2F10.0.0.1%3A12384"
	ramKey  = "/metadata?key=mooncake%2Fram%2F10.0.0.1%3A12384"
	rpcBody = `{"ip_or_host_name":"10.0.0.1","rpc_port":15228}`
	rpcMove = `{"ip_or_host_name":"10.0.0.1","rpc_port":16000}`
	// An encoded key with reserved characters: the real cpp test RemoteClientDeletesUrlEncodedKey.
	oddKey = "/metadata?key=mooncake%2Fram%2Fhost%20name%3A123%3Fx%3D1%26y%3D2"
)

func runRows(t *testing.T, base string, rows []exchangeRow) {
	t.Helper()
	// Redirects are answers under test, not something to follow.
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, row := range rows {
		ctx := bounded(t, 5*time.Second)
		var rd io.Reader
		if row.body != "" {
			rd = strings.NewReader(row.body)
		}
		req, err := http.NewRequestWithContext(ctx, row.method, base+row.target, rd)
		if err != nil {
			t.Fatalf("row %d %s: %v", i, row.name, err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("row %d %s: %s %s: %v", i, row.name, row.method, row.target, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != row.status || string(got) != row.respBody {
			t.Errorf("row %d %s: %s %s = %d %q, want %d %q", i, row.name, row.method, row.target,
				resp.StatusCode, got, row.status, row.respBody)
		}
		ct, has := resp.Header["Content-Type"]
		switch {
		case row.ct == noCT && has:
			t.Errorf("row %d %s: Content-Type %q, want none", i, row.name, ct)
		case row.ct != noCT && resp.Header.Get("Content-Type") != row.ct:
			t.Errorf("row %d %s: Content-Type %q, want %q", i, row.name, resp.Header.Get("Content-Type"), row.ct)
		}
		if row.location != "" && resp.Header.Get("Location") != row.location {
			t.Errorf("row %d %s: Location %q, want %q", i, row.name, resp.Header.Get("Location"), row.location)
		}
	}
}

// TestMetadataCPP pins mooncake-store/src/http_metadata_server.cpp (the server inside the
// master, after the #2311 idempotent rpc_meta fix) and coro_http's defaults
// (yalantinglibs cinatra/coro_http_connection.hpp, response_cv.hpp).
func TestMetadataCPP(t *testing.T) {
	s, _ := start(t, fakestore.Config{Flavor: fakestore.FlavorCPP})
	const ct = "application/json"
	runRows(t, s.URL(api.PlaneMetadata), []exchangeRow{
		{"missing key", "GET", "/metadata", "", 400, "Missing key parameter", noCT, ""},
		{"empty key", "GET", "/metadata?key=", "", 400, "Missing key parameter", noCT, ""},
		{"PUT without key", "PUT", "/metadata", "x", 400, "Missing key parameter", noCT, ""},
		{"DELETE without key", "DELETE", "/metadata?key=", "", 400, "Missing key parameter", noCT, ""},
		{"GET miss", "GET", rpcKey, "", 404, "metadata not found", noCT, ""},
		{"PUT new rpc_meta", "PUT", rpcKey, rpcBody, 200, "metadata updated", noCT, ""},
		{"GET hit carries JSON content type", "GET", rpcKey, "", 200, rpcBody, ct, ""},
		{"PUT same rpc_meta body", "PUT", rpcKey, rpcBody, 200, "metadata unchanged", noCT, ""},
		{"PUT other rpc_meta body", "PUT", rpcKey, rpcMove, 400, "Duplicate rpc_meta key not allowed", noCT, ""},
		{"refused PUT left the value", "GET", rpcKey, "", 200, rpcBody, ct, ""},
		{"PUT ram", "PUT", ramKey, `{"name":"a"}`, 200, "metadata updated", noCT, ""},
		{"PUT ram again overwrites", "PUT", ramKey, `{"name":"b"}`, 200, "metadata updated", noCT, ""},
		{"GET ram", "GET", ramKey, "", 200, `{"name":"b"}`, ct, ""},
		{"DELETE hit", "DELETE", rpcKey, "", 200, "metadata deleted", noCT, ""},
		{"DELETE miss", "DELETE", rpcKey, "", 404, "metadata not found", noCT, ""},
		{"PUT after DELETE", "PUT", rpcKey, rpcMove, 200, "metadata updated", noCT, ""},
		{"encoded key PUT", "PUT", oddKey, `{"kind":"ram"}`, 200, "metadata updated", noCT, ""},
		{"encoded key GET", "GET", oddKey, "", 200, `{"kind":"ram"}`, ct, ""},
		{"encoded key DELETE", "DELETE", oddKey, "", 200, "metadata deleted", noCT, ""},
		{"other method", "POST", rpcKey, "x", 404, "404 Not Found", noCT, ""},
		{"HEAD is not routed", "HEAD", rpcKey, "", 404, "", noCT, ""},
		{"health", "GET", "/health", "", 200, "OK", noCT, ""},
		{"unknown path", "GET", "/nope", "", 404, "404 Not Found", noCT, ""},
		{"bad percent-encoding", "GET", "/metadata?key=%zz", "", 400, "Missing key parameter", noCT, ""},
	})
}

// TestMetadataPython pins mooncake-wheel/mooncake/http_metadata_server.py (aiohttp: text bodies
// get "; charset=utf-8", the key is stripped and checked before the method).
func TestMetadataPython(t *testing.T) {
	s, _ := start(t, fakestore.Config{Flavor: fakestore.FlavorPython})
	const ct, raw = "application/json; charset=utf-8", "application/json"
	runRows(t, s.URL(api.PlaneMetadata), []exchangeRow{
		{"missing key", "GET", "/metadata", "", 400, "metadata key is required", ct, ""},
		{"blank key is stripped", "GET", "/metadata?key=%20%20", "", 400, "metadata key is required", ct, ""},
		{"key is checked before the method", "POST", "/metadata", "", 400, "metadata key is required", ct, ""},
		{"other method", "POST", rpcKey, "x", 405, "Method not allowed", ct, ""},
		{"PATCH", "PATCH", rpcKey, "x", 405, "Method not allowed", ct, ""},
		{"GET miss", "GET", rpcKey, "", 404, "metadata not found", ct, ""},
		{"PUT new rpc_meta", "PUT", rpcKey, rpcBody, 200, "metadata updated", ct, ""},
		{"GET hit is raw bytes", "GET", rpcKey, "", 200, rpcBody, raw, ""},
		{"PUT same rpc_meta body", "PUT", rpcKey, rpcBody, 200, "metadata unchanged", ct, ""},
		{"PUT other rpc_meta body", "PUT", rpcKey, rpcMove, 400, "Duplicate rpc_meta key not allowed", ct, ""},
		{"PUT ram overwrites", "PUT", ramKey, "1", 200, "metadata updated", ct, ""},
		{"PUT ram again", "PUT", ramKey, "2", 200, "metadata updated", ct, ""},
		{"DELETE hit", "DELETE", rpcKey, "", 200, "metadata deleted", ct, ""},
		{"DELETE miss", "DELETE", rpcKey, "", 404, "metadata not found", ct, ""},
		{"no /health route", "GET", "/health", "", 404, "404: Not Found", "text/plain; charset=utf-8", ""},
		{"bad percent-encoding", "GET", "/metadata?key=%zz", "", 400, "metadata key is required", ct, ""},
	})
}

// TestMetadataGo pins mooncake-transfer-engine/example/http-metadata-server/main.go (gin: the key
// is used as given, PUT always overwrites, DELETE always succeeds, unrouted requests 404).
func TestMetadataGo(t *testing.T) {
	s, _ := start(t, fakestore.Config{Flavor: fakestore.FlavorGo})
	const ct = "application/json; charset=utf-8"
	runRows(t, s.URL(api.PlaneMetadata), []exchangeRow{
		{"missing key is the empty key", "GET", "/metadata", "", 404, "metadata not found", ct, ""},
		{"PUT to the empty key", "PUT", "/metadata", "e", 200, "metadata updated", ct, ""},
		{"GET the empty key", "GET", "/metadata?key=", "", 200, "e", ct, ""},
		{"PUT rpc_meta", "PUT", rpcKey, rpcBody, 200, "metadata updated", ct, ""},
		{"PUT rpc_meta again overwrites", "PUT", rpcKey, rpcMove, 200, "metadata updated", ct, ""},
		{"GET sees the overwrite", "GET", rpcKey, "", 200, rpcMove, ct, ""},
		{"DELETE hit", "DELETE", rpcKey, "", 200, "metadata deleted", ct, ""},
		{"DELETE miss still succeeds", "DELETE", rpcKey, "", 200, "metadata deleted", ct, ""},
		{"other method", "POST", rpcKey, "x", 404, "404 page not found", "text/plain", ""},
		{"no /health route", "GET", "/health", "", 404, "404 page not found", "text/plain", ""},
		{"trailing slash redirects GET", "GET", "/metadata/?key=a", "", 301,
			"<a href=\"/metadata?key=a\">Moved Permanently</a>.\n\n", "text/html; charset=utf-8", "/metadata?key=a"},
		{"bad percent-encoding", "GET", "/metadata?key=%zz", "", 400, "invalid request", ct, ""},
	})
}

// TestMetadataBodyCap: a body over the cap is refused with 413 on every flavor and stores
// nothing; the server keeps serving.
func TestMetadataBodyCap(t *testing.T) {
	for _, tc := range []struct {
		flavor fakestore.Flavor
		body   string
		ct     string
	}{
		{fakestore.FlavorCPP, "Request Entity Too Large", noCT},
		{fakestore.FlavorPython, "Maximum request body size 16 exceeded, actual body size 17", "text/plain; charset=utf-8"},
		{fakestore.FlavorGo, "Request Entity Too Large", "text/plain"},
	} {
		t.Run(string(tc.flavor), func(t *testing.T) {
			s, _ := start(t, fakestore.Config{Flavor: tc.flavor, MaxBody: 16})
			missing := 404
			runRows(t, s.URL(api.PlaneMetadata), []exchangeRow{
				{"over the cap", "PUT", ramKey, strings.Repeat("x", 17), 413, tc.body, tc.ct, ""},
				{"nothing stored", "GET", ramKey, "", missing, "metadata not found", map[fakestore.Flavor]string{
					fakestore.FlavorCPP: noCT, fakestore.FlavorPython: "application/json; charset=utf-8", fakestore.FlavorGo: "application/json; charset=utf-8"}[tc.flavor], ""},
				{"at the cap", "PUT", ramKey, strings.Repeat("x", 16), 200, "metadata updated", map[fakestore.Flavor]string{
					fakestore.FlavorCPP: noCT, fakestore.FlavorPython: "application/json; charset=utf-8", fakestore.FlavorGo: "application/json; charset=utf-8"}[tc.flavor], ""},
			})
		})
	}
}
