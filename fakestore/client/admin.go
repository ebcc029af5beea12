package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Health is the master's GET /health answer.
type Health struct {
	Status       string `json:"status"`
	Role         string `json:"role"`
	HAState      string `json:"ha_state"`
	ServiceReady bool   `json:"service_ready"`
}

// SegmentDetail is one entry of GET /get_segments_detail.
type SegmentDetail struct {
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

// SegmentsDetail is GET /get_segments_detail.
type SegmentsDetail struct {
	TotalSegments int             `json:"total_segments"`
	Segments      []SegmentDetail `json:"segments"`
}

// BufferDescriptor is one memory replica in GET /query_key.
type BufferDescriptor struct {
	Size              uint64 `json:"size_"`
	BufferAddress     uint64 `json:"buffer_address_"`
	TransportEndpoint string `json:"transport_endpoint_"`
}

func (c *Client) adminText(ctx context.Context, path string) (string, error) {
	status, body, err := c.do(ctx, http.MethodGet, c.admin, path, nil, true)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", &StatusError{Method: http.MethodGet, URL: c.admin + path, Status: status, Body: string(body)}
	}
	return string(body), nil
}

func lines(s string) []string {
	out := []string{}
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Health reads GET /health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.getJSON(ctx, "/health", &h)
	return h, err
}

// MetricsText reads GET /metrics verbatim.
func (c *Client) MetricsText(ctx context.Context) (string, error) {
	return c.adminText(ctx, "/metrics")
}

// Metrics reads GET /metrics into series -> value; a series is its name with labels as exposed,
// e.g. `segment_total_capacity_bytes{segment="h:1"}`.
func (c *Client) Metrics(ctx context.Context) (map[string]float64, error) {
	text, err := c.MetricsText(ctx)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(text)
}

// ParseMetrics parses Prometheus text exposition lines (comments skipped).
func ParseMetrics(text string) (map[string]float64, error) {
	out := map[string]float64{}
	for i, l := range lines(text) {
		if strings.HasPrefix(l, "#") {
			continue
		}
		sp := strings.LastIndexByte(l, ' ')
		if sp <= 0 {
			return nil, fmt.Errorf("metrics line %d %q: want <series> <value>", i+1, l)
		}
		v, err := strconv.ParseFloat(l[sp+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", i+1, l, err)
		}
		out[l[:sp]] = v
	}
	return out, nil
}

// AllSegments reads GET /get_all_segments (a name once per mounted segment).
func (c *Client) AllSegments(ctx context.Context) ([]string, error) {
	t, err := c.adminText(ctx, "/get_all_segments")
	return lines(t), err
}

// AllKeys reads GET /get_all_keys.
func (c *Client) AllKeys(ctx context.Context) ([]string, error) {
	t, err := c.adminText(ctx, "/get_all_keys")
	return lines(t), err
}

// SegmentsDetail reads GET /get_segments_detail.
func (c *Client) SegmentsDetail(ctx context.Context) (SegmentsDetail, error) {
	var d SegmentsDetail
	err := c.getJSON(ctx, "/get_segments_detail", &d)
	return d, err
}

// QueryKey reads GET /query_key?key=; a missing object is a *StatusError 404 "OBJECT_NOT_FOUND".
func (c *Client) QueryKey(ctx context.Context, key string) ([]BufferDescriptor, error) {
	t, err := c.adminText(ctx, "/query_key?key="+url.QueryEscape(key))
	if err != nil {
		return nil, err
	}
	var out []BufferDescriptor
	for _, l := range lines(t) {
		var d BufferDescriptor
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			return nil, fmt.Errorf("query_key %s: line %q: %w", key, l, err)
		}
		out = append(out, d)
	}
	return out, nil
}
