package fakestore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/widetp/widetp/fakestore/api"
)

// The admin plane imitates the master's admin HTTP server (mooncake-store/src/
// master_admin_service.cpp on coro_http): the same paths, bodies and Content-Types. A fake master
// is always the serving leader.

const healthJSON = `{"status":"ok","role":"leader","ha_state":"serving","service_ready":true}`

func (s *Server) serveAdmin(x *exchange, r *http.Request) {
	x.Header()["Server"] = headerValues[cinatraServer]
	if r.Method != http.MethodGet {
		writeText(x, http.StatusNotFound, ctNone, bodyCinatra404)
		return
	}
	switch r.URL.Path {
	case "/health":
		writeText(x, http.StatusOK, ctJSONUTF8, healthJSON)
	case "/metrics":
		writeText(x, http.StatusOK, ctPrometheus, s.metricsText())
	case "/get_all_segments":
		s.mu.Lock()
		var b strings.Builder
		for _, seg := range s.sortedSegments() {
			b.WriteString(seg.seg.Name)
			b.WriteByte('\n')
		}
		s.mu.Unlock()
		writeText(x, http.StatusOK, ctPrometheus, b.String())
	case "/get_all_keys":
		s.mu.Lock()
		keys := make([]string, 0, len(s.m.objects))
		for k := range s.m.objects {
			keys = append(keys, k)
		}
		s.mu.Unlock()
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			b.WriteString(k)
			b.WriteByte('\n')
		}
		writeText(x, http.StatusOK, ctPrometheus, b.String())
	case "/get_segments_detail":
		writeText(x, http.StatusOK, ctJSONUTF8, s.segmentsDetailJSON())
	case "/query_key":
		q, err := urlQuery(r)
		key := ""
		if err == nil {
			key = q.Get("key")
		}
		x.key = key
		s.mu.Lock()
		out := s.opGetReplicaList(api.KeyRequest{Key: key}, s.clock.Now())
		s.mu.Unlock()
		if out.ErrorCode != api.OK {
			writeText(x, http.StatusNotFound, ctPrometheus, out.ErrorCode.String())
			return
		}
		var b strings.Builder
		for _, rep := range out.Replicas {
			// struct_json of AllocatedBuffer::Descriptor, one per memory replica.
			d, _ := json.Marshal(struct {
				Size              uint64 `json:"size_"`
				BufferAddress     uint64 `json:"buffer_address_"`
				TransportEndpoint string `json:"transport_endpoint_"`
			}{rep.Size, rep.BufferAddress, rep.TransportEndpoint})
			b.Write(d)
			b.WriteByte('\n')
		}
		writeText(x, http.StatusOK, ctPrometheus, b.String())
	default:
		writeText(x, http.StatusNotFound, ctNone, bodyCinatra404)
	}
}

// forcedAdmin answers a status fault: 503 is the master's "service plane is not active" JSON;
// other statuses carry coro_http's default text.
func (s *Server) forcedAdmin(x *exchange, f *api.Fault) {
	x.Header()["Server"] = headerValues[cinatraServer]
	status := f.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	body := f.Body
	if body == "" && status == http.StatusServiceUnavailable {
		body = fmt.Sprintf(`{"success":false,"error_code":%d,"error_message":"service plane is not active"}`, int32(api.UnavailableInCurrentMode))
		writeText(x, status, ctJSONUTF8, body)
		return
	}
	if body == "" {
		body = fmt.Sprintf("%d %s", status, http.StatusText(status))
	}
	writeText(x, status, ctNone, body)
}

type segmentDetail struct {
	SegmentName            string  `json:"segment_name"`
	SegmentID              string  `json:"segment_id"`
	ClientID               string  `json:"client_id"`
	BaseAddress            string  `json:"base_address"`
	SizeBytes              uint64  `json:"size_bytes"`
	SizeHuman              string  `json:"size_human"`
	TEEndpoint             string  `json:"te_endpoint"`
	Protocol               string  `json:"protocol"`
	Status                 string  `json:"status"`
	AllocatorUsedBytes     uint64  `json:"allocator_used_bytes"`
	AllocatorCapacityBytes uint64  `json:"allocator_capacity_bytes"`
	AllocatorUsagePercent  float64 `json:"allocator_usage_percent"`
}

// segmentsDetailJSON renders HttpSegmentsDetailResponse in its field order.
func (s *Server) segmentsDetailJSON() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	segs := s.sortedSegments()
	out := struct {
		TotalSegments int             `json:"total_segments"`
		Segments      []segmentDetail `json:"segments"`
	}{TotalSegments: len(segs), Segments: []segmentDetail{}}
	for _, seg := range segs {
		d := segmentDetail{
			SegmentName: seg.seg.Name, SegmentID: seg.seg.ID, ClientID: seg.client,
			BaseAddress: "0x" + strconv.FormatUint(seg.seg.Base, 16), SizeBytes: seg.seg.Size,
			// ostream's default float format: 6 significant digits, %g style.
			SizeHuman:  strconv.FormatFloat(float64(seg.seg.Size)/1024/1024/1024, 'g', 6, 64) + " GiB",
			TEEndpoint: seg.seg.TEEndpoint, Protocol: seg.seg.Protocol, Status: "OK",
			AllocatorUsedBytes: seg.used, AllocatorCapacityBytes: seg.seg.Size,
		}
		if seg.seg.Size > 0 {
			d.AllocatorUsagePercent = float64(seg.used) / float64(seg.seg.Size) * 100
		}
		out.Segments = append(out.Segments, d)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// metricsText renders the master's Prometheus exposition (MasterMetricManager's names and help).
func (s *Server) metricsText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	gauge := func(name, help string, v int64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
	}
	var allocated, capacity int64
	perSegCap := map[string]int64{}
	perSegUsed := map[string]int64{}
	for _, seg := range s.m.segments {
		allocated += int64(seg.used)
		capacity += int64(seg.seg.Size)
		perSegCap[seg.seg.Name] += int64(seg.seg.Size)
		perSegUsed[seg.seg.Name] += int64(seg.used)
	}
	gauge("master_allocated_bytes", "Total memory bytes currently allocated across all segments", allocated)
	gauge("master_total_capacity_bytes", "Total memory capacity across all mounted segments", capacity)
	names := make([]string, 0, len(perSegCap))
	for n := range perSegCap {
		names = append(names, n)
	}
	sort.Strings(names)
	labelled := func(name, help string, vals map[string]int64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, n := range names {
			fmt.Fprintf(&b, "%s{segment=%q} %d\n", name, n, vals[n])
		}
	}
	labelled("segment_allocated_bytes", "Total memory bytes currently allocated of the segment", perSegUsed)
	labelled("segment_total_capacity_bytes", "Total memory capacity of the mounted segment", perSegCap)
	gauge("master_key_count", "Total number of keys managed by the master", int64(len(s.m.objects)))
	gauge("master_active_clients", "Total number of active clients", int64(s.activeClients()))
	for _, c := range []struct{ stem, what string }{
		{"put_start", "PutStart"}, {"put_end", "PutEnd"}, {"put_revoke", "PutRevoke"},
		{"get_replica_list", "GetReplicaList"}, {"remove", "Remove"}, {"remove_all", "Remove all"},
		{"mount_segment", "MountSegment"}, {"unmount_segment", "UnmountSegment"},
		{"remount_segment", "RemountSegment"}, {"ping", "ping"}, {"batch_exist_key", "BatchExistKey"},
	} {
		var v opCounter
		if p := s.m.counters[c.stem]; p != nil {
			v = *p
		}
		fmt.Fprintf(&b, "# HELP master_%s_requests_total Total number of %s requests received\n# TYPE master_%s_requests_total counter\nmaster_%s_requests_total %d\n",
			c.stem, c.what, c.stem, c.stem, v.requests)
		fmt.Fprintf(&b, "# HELP master_%s_failures_total Total number of failed %s requests\n# TYPE master_%s_failures_total counter\nmaster_%s_failures_total %d\n",
			c.stem, c.what, c.stem, c.stem, v.failures)
	}
	return b.String()
}
