package client_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/internal/testport"
)

func TestNewRejectsBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		opt     client.Option
		mention string
	}{
		{client.WithMetadataURL("localhost:8080"), "metadata URL"},
		{client.WithMasterURL("ftp://h:1"), "master URL"},
		{client.WithAdminURL("http://"), "admin URL"},
		{client.WithRetries(-1), "retries"},
	} {
		if _, err := client.New(tc.opt); err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("New: %v, want an error naming %q", err, tc.mention)
		}
	}
	c, err := client.New(client.WithAdminURL("http://127.0.0.1:1/"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Get(ctx, "k"); err == nil || !strings.Contains(err.Error(), "no URL configured") {
		t.Errorf("Get without a metadata URL: %v", err)
	}
}

// resetter accepts TCP connections, reads the request line and resets the connection, counting
// the requests that arrived: a store that is reachable but never answers. (Counting requests, not
// connections: the transport may dial a spare connection it never sends on.)
func resetter(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					n.Add(1)
				}
				c.(*net.TCPConn).SetLinger(0)
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &n
}

// TestRetriesAreBoundedAndOnlyForIdempotentCalls: a connection error is retried up to the bound
// for an idempotent call, never for one that might have been applied.
func TestRetriesAreBoundedAndOnlyForIdempotentCalls(t *testing.T) {
	url, accepted := resetter(t)
	c, err := client.New(client.WithMetadataURL(url), client.WithMasterURL(url), client.WithRetries(2),
		client.WithBackoff(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Get(ctx, "k"); err == nil || !strings.Contains(err.Error(), "attempt 3") {
		t.Errorf("idempotent GET against a resetting peer: %v, want failure on attempt 3", err)
	}
	if got := accepted.Swap(0); got != 3 {
		t.Errorf("idempotent GET sent %d requests, want 3 (1 + 2 retries)", got)
	}
	_, err = c.PutStart(ctx, api.PutStartRequest{Key: "k"})
	if err == nil {
		t.Fatal("PutStart against a resetting peer succeeded")
	}
	if got := accepted.Load(); got != 1 {
		t.Errorf("non-idempotent PutStart sent %d requests, want 1", got)
	}
}

func TestDialFailuresAreRetriedEvenForNonIdempotentCallsAndStopAtTheContext(t *testing.T) {
	addr := testport.Addr(t, "127.0.0.1") // nothing listens: every dial is refused
	c, err := client.New(client.WithMasterURL("http://"+addr), client.WithRetries(50), client.WithBackoff(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err = c.PutStart(ctx, api.PutStartRequest{Key: "k"})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PutStart to a closed port: %v, want the context's deadline to end the retries", err)
	}
	if time.Since(begin) > 5*time.Second {
		t.Errorf("retries outlived the context by far: %v", time.Since(begin))
	}
}

func TestStatusErrorAndDuplicate(t *testing.T) {
	dup := &client.StatusError{Method: "PUT", URL: "http://h/metadata?key=k", Status: 400, Body: "Duplicate rpc_meta key not allowed"}
	if !client.IsDuplicate(dup) || client.IsDuplicate(&client.StatusError{Status: 400, Body: "Missing key parameter"}) {
		t.Error("IsDuplicate misclassifies")
	}
	if !strings.Contains(dup.Error(), "HTTP 400: Duplicate rpc_meta key not allowed") {
		t.Errorf("error text %q", dup.Error())
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := client.ParseMetrics("# HELP x y\n# TYPE x gauge\nx 3\nseg{segment=\"a b\"} 1.5e+09\n")
	if err != nil || m["x"] != 3 || m[`seg{segment="a b"}`] != 1.5e9 {
		t.Errorf("ParseMetrics = %v %v", m, err)
	}
	if _, err := client.ParseMetrics("x three\n"); err == nil {
		t.Error("a non-numeric value parsed")
	}
}
