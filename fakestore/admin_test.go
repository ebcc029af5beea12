package fakestore_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
)

// TestAdminEndpointFormats pins mooncake-store/src/master_admin_service.cpp: paths, bodies and
// Content-Types of the admin server, on coro_http.
func TestAdminEndpointFormats(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 5*time.Second)
	if err := c.MountSegment(ctx, "c1", api.Segment{ID: "s1", Name: "10.0.0.1:12300", Base: 0x7f00, Size: 1 << 30,
		TEEndpoint: "10.0.0.1:15000", Protocol: "tcp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutStart(ctx, api.PutStartRequest{ClientID: "c1", Key: "obj", SliceLength: 512, Config: api.ReplicateConfig{ReplicaNum: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutEnd(ctx, "c1", "obj"); err != nil {
		t.Fatal(err)
	}
	runRows(t, s.URL(api.PlaneAdmin), []exchangeRow{
		{"health", "GET", "/health", "", 200, `{"status":"ok","role":"leader","ha_state":"serving","service_ready":true}`,
			"application/json; charset=utf-8", ""},
		{"all segments, one a line", "GET", "/get_all_segments", "", 200, "10.0.0.1:12300\n", "text/plain; version=0.0.4", ""},
		{"all keys, one a line", "GET", "/get_all_keys", "", 200, "obj\n", "text/plain; version=0.0.4", ""},
		{"segments detail in HttpSegmentsDetailResponse order", "GET", "/get_segments_detail", "", 200,
			`{"total_segments":1,"segments":[{"segment_name":"10.0.0.1:12300","segment_id":"s1","client_id":"c1",` +
				`"base_address":"0x7f00","size_bytes":1073741824,"size_human":"1 GiB","te_endpoint":"10.0.0.1:15000",` +
				`"protocol":"tcp","status":"OK","allocator_used_bytes":512,"allocator_capacity_bytes":1073741824,` +
				`"allocator_usage_percent":0.0000476837158203125}]}`, "application/json; charset=utf-8", ""},
		{"query_key: one buffer descriptor a line", "GET", "/query_key?key=obj", "", 200,
			`{"size_":512,"buffer_address_":32512,"transport_endpoint_":"10.0.0.1:15000"}` + "\n", "text/plain; version=0.0.4", ""},
		{"query_key miss", "GET", "/query_key?key=nope", "", 404, "OBJECT_NOT_FOUND", "text/plain; version=0.0.4", ""},
		{"unknown path", "GET", "/nope", "", 404, "404 Not Found", noCT, ""},
		{"other method", "POST", "/health", "", 404, "404 Not Found", noCT, ""},
	})
	text, err := c.MetricsText(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# HELP master_key_count Total number of keys managed by the master\n# TYPE master_key_count gauge\nmaster_key_count 1\n",
		"master_active_clients 0\n",
		"master_total_capacity_bytes 1073741824\n",
		"segment_total_capacity_bytes{segment=\"10.0.0.1:12300\"} 1073741824\n",
		"segment_allocated_bytes{segment=\"10.0.0.1:12300\"} 512\n",
		"master_put_start_requests_total 1\n",
		"master_mount_segment_requests_total 1\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if _, err := client.ParseMetrics(text); err != nil {
		t.Errorf("/metrics is not valid exposition text: %v", err)
	}
}

// TestAdminAndMetadataHealthAreDistinct: the cpp metadata server's /health is plain "OK"; the
// admin's is JSON. A client pointed at the wrong port must notice.
func TestAdminAndMetadataHealthAreDistinct(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	h, err := c.Health(bounded(t, 5*time.Second))
	if err != nil || h.Role != "leader" || !h.ServiceReady {
		t.Fatalf("admin health = %+v %v", h, err)
	}
	wrong, err := client.New(client.WithAdminURL(s.URL(api.PlaneMetadata)), client.WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Health(bounded(t, 5*time.Second)); err == nil {
		t.Error("decoding the metadata server's plain OK as admin health succeeded")
	}
	var se *client.StatusError
	if _, err := wrong.AllSegments(context.Background()); !errors.As(err, &se) || se.Status != http.StatusNotFound {
		t.Errorf("admin path on the metadata port: %v, want a 404 StatusError", err)
	}
}
