// Package client is a typed, context-aware Go client of the fake Mooncake store (package
// fakestore): the metadata plane, every master operation, the admin endpoints and the test
// endpoints. Every call takes a context and is bounded by it; transport failures are retried a
// bounded number of times, and only where a retry cannot do something twice: idempotent calls
// retry any connection error, the others only a failed dial (the request never left).
//
// The simulated node uses it as its Mooncake client; the harness uses it to wait and inspect.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const (
	// DefaultRetries bounds how often a call is retried after a transport failure: enough to ride
	// out a store restart's brief refusal, few enough that a dead store fails within a second.
	DefaultRetries = 3
	// DefaultBackoff is the first retry's delay; each further retry doubles it.
	DefaultBackoff = 50 * time.Millisecond
	// maxResponse caps a response body: a snapshot of a large run is tens of MiB at most.
	maxResponse = 256 << 20
)

// Client talks to one fake store. The zero value is not usable; build it with New.
type Client struct {
	metadata string
	master   string
	admin    string
	hc       *http.Client
	retries  int
	backoff  time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithMetadataURL sets the metadata plane's base URL (http://host:8080).
func WithMetadataURL(u string) Option { return func(c *Client) { c.metadata = u } }

// WithMasterURL sets the master plane's base URL (http://host:50052).
func WithMasterURL(u string) Option { return func(c *Client) { c.master = u } }

// WithAdminURL sets the admin listener's base URL (http://host:9003), which also serves the test
// endpoints.
func WithAdminURL(u string) Option { return func(c *Client) { c.admin = u } }

// WithHTTPClient replaces the HTTP client. Its Timeout must be zero or longer than the longest
// long poll (fakestore.MaxEventWait); contexts bound every call anyway.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets how many times a call is retried after a transport failure (0 = never).
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// WithBackoff sets the delay before the first retry (doubled for each further one).
func WithBackoff(d time.Duration) Option { return func(c *Client) { c.backoff = d } }

// New builds a client. Planes whose URL is not set fail when used.
func New(opts ...Option) (*Client, error) {
	c := &Client{retries: DefaultRetries, backoff: DefaultBackoff}
	for _, o := range opts {
		o(c)
	}
	for name, u := range map[string]*string{"metadata": &c.metadata, "master": &c.master, "admin": &c.admin} {
		if *u == "" {
			continue
		}
		p, err := url.Parse(*u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("fakestore client: %s URL %q: want http://host:port", name, *u)
		}
		*u = strings.TrimRight(*u, "/")
	}
	if c.retries < 0 || c.backoff < 0 {
		return nil, fmt.Errorf("fakestore client: retries %d and backoff %v must not be negative", c.retries, c.backoff)
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Many simulated workers and benchmarks share one client: keep enough idle keep-alive
		// connections per host that steady traffic never re-dials.
		t.MaxIdleConns = 512
		t.MaxIdleConnsPerHost = 128
		c.hc = &http.Client{Transport: t}
	}
	return c, nil
}

// StatusError is an answer with a status the call does not treat as success.
type StatusError struct {
	Method string
	URL    string
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.URL, e.Status, strings.TrimSpace(e.Body))
}

// ErrNotFound is a metadata key the store does not hold (404 "metadata not found").
var ErrNotFound = errors.New("metadata not found")

// IsDuplicate reports whether err is the metadata server refusing an existing rpc_meta key.
func IsDuplicate(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == http.StatusBadRequest && se.Body == "Duplicate rpc_meta key not allowed"
}

// retryable says whether a transport error may be retried: a failed dial never reached the
// server; other connection errors may have, so only idempotent calls retry them.
func retryable(err error, idempotent bool) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return idempotent
}

// do sends one request with bounded retries and returns the status and body of the answer.
func (c *Client) do(ctx context.Context, method, base, path string, body []byte, idempotent bool) (int, []byte, error) {
	if base == "" {
		return 0, nil, fmt.Errorf("%s %s: no URL configured for this plane", method, path)
	}
	u := base + path
	delay := c.backoff
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err != nil {
			return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
		}
		resp, err := c.hc.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
			resp.Body.Close()
			if rerr == nil {
				return resp.StatusCode, b, nil
			}
			err = rerr
		}
		if ctx.Err() != nil || attempt >= c.retries || !retryable(err, idempotent) {
			return 0, nil, fmt.Errorf("%s %s (attempt %d): %w", method, u, attempt+1, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, nil, fmt.Errorf("%s %s (attempt %d): %w; retry abandoned: %w", method, u, attempt+1, err, ctx.Err())
		case <-t.C:
		}
		delay *= 2
	}
}

// Get reads a metadata key; a missing key is ErrNotFound.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	path := "/metadata?key=" + url.QueryEscape(key)
	status, body, err := c.do(ctx, http.MethodGet, c.metadata, path, nil, true)
	if err != nil {
		return nil, fmt.Errorf("get metadata %s: %w", key, err)
	}
	switch status {
	case http.StatusOK:
		return body, nil
	case http.StatusNotFound:
		return nil, fmt.Errorf("get metadata %s: %w", key, ErrNotFound)
	}
	return nil, &StatusError{Method: http.MethodGet, URL: c.metadata + path, Status: status, Body: string(body)}
}

// Put writes a metadata key and returns the server's word ("metadata updated" or "metadata
// unchanged"); a refused rpc_meta duplicate is a *StatusError (see IsDuplicate).
func (c *Client) Put(ctx context.Context, key string, value []byte) (string, error) {
	path := "/metadata?key=" + url.QueryEscape(key)
	if value == nil {
		value = []byte{}
	}
	// A PUT stores the same value however often it lands: idempotent.
	status, body, err := c.do(ctx, http.MethodPut, c.metadata, path, value, true)
	if err != nil {
		return "", fmt.Errorf("put metadata %s: %w", key, err)
	}
	if status != http.StatusOK {
		return "", &StatusError{Method: http.MethodPut, URL: c.metadata + path, Status: status, Body: string(body)}
	}
	return string(body), nil
}

// Delete removes a metadata key; a missing key is ErrNotFound (cpp and python flavors).
func (c *Client) Delete(ctx context.Context, key string) error {
	path := "/metadata?key=" + url.QueryEscape(key)
	status, body, err := c.do(ctx, http.MethodDelete, c.metadata, path, nil, true)
	if err != nil {
		return fmt.Errorf("delete metadata %s: %w", key, err)
	}
	switch status {
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
		return fmt.Errorf("delete metadata %s: %w", key, ErrNotFound)
	}
	return &StatusError{Method: http.MethodDelete, URL: c.metadata + path, Status: status, Body: string(body)}
}

// getJSON GETs a path on the admin listener and decodes a 200 answer into out.
func (c *Client) getJSON(ctx context.Context, path string, out any) error {
	status, body, err := c.do(ctx, http.MethodGet, c.admin, path, nil, true)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return &StatusError{Method: http.MethodGet, URL: c.admin + path, Status: status, Body: string(body)}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode GET %s%s: %w", c.admin, path, err)
	}
	return nil
}

// sendJSON sends in as JSON to the admin listener and decodes a want-status answer into out.
func (c *Client) sendJSON(ctx context.Context, method, path string, in any, want int, out any, idempotent bool) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	status, rb, err := c.do(ctx, method, c.admin, path, body, idempotent)
	if err != nil {
		return err
	}
	if status != want {
		return &StatusError{Method: method, URL: c.admin + path, Status: status, Body: string(rb)}
	}
	if out != nil {
		if err := json.Unmarshal(rb, out); err != nil {
			return fmt.Errorf("decode %s %s%s: %w", method, c.admin, path, err)
		}
	}
	return nil
}
