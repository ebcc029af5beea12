package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/report"
)

// PostReport sends one process record. It is not retried once sent (the store keeps every post
// in the history, and a retry would add a copy).
func (c *Client) PostReport(ctx context.Context, p report.Process) error {
	if err := c.sendJSON(ctx, http.MethodPost, api.TestPrefix+"reports", p, http.StatusOK, nil, false); err != nil {
		return fmt.Errorf("post report %s: %w", p.ID, err)
	}
	return nil
}

// Reports returns the latest record of every process, by id.
func (c *Client) Reports(ctx context.Context) ([]report.Process, error) {
	var out []report.Process
	err := c.getJSON(ctx, api.TestPrefix+"reports", &out)
	return out, err
}

// ReportHistory returns every report post in arrival order.
func (c *Client) ReportHistory(ctx context.Context) ([]report.Process, error) {
	var out []report.Process
	err := c.getJSON(ctx, api.TestPrefix+"reports?history=1", &out)
	return out, err
}

// PostNodeStatus sends a node's status. Not retried once sent: the node posts again on its next
// change, and a reader keeps the highest Seq.
func (c *Client) PostNodeStatus(ctx context.Context, st api.NodeStatus) error {
	if err := c.sendJSON(ctx, http.MethodPost, api.TestPrefix+"nodes", st, http.StatusOK, nil, false); err != nil {
		return fmt.Errorf("post status of node %s: %w", st.Host, err)
	}
	return nil
}

// NodeStatuses returns the latest status of every node that posted one, by host.
func (c *Client) NodeStatuses(ctx context.Context) ([]api.NodeStatus, error) {
	var out []api.NodeStatus
	err := c.getJSON(ctx, api.TestPrefix+"nodes", &out)
	return out, err
}

// Registrations returns every registration and every duplicate-name event.
func (c *Client) Registrations(ctx context.Context) ([]api.Registration, []api.Duplicate, error) {
	var out struct {
		Registrations []api.Registration `json:"registrations"`
		Duplicates    []api.Duplicate    `json:"duplicates"`
	}
	err := c.getJSON(ctx, api.TestPrefix+"registrations", &out)
	return out.Registrations, out.Duplicates, err
}

// Events returns the events after since, waiting up to wait (the server caps it) for the first.
func (c *Client) Events(ctx context.Context, since uint64, wait time.Duration) (api.EventsResponse, error) {
	var out api.EventsResponse
	path := fmt.Sprintf("%sevents?since=%d&wait=%s", api.TestPrefix, since, url.QueryEscape(wait.String()))
	err := c.getJSON(ctx, path, &out)
	return out, err
}

// pollSlice is how long one long poll of WaitFor waits: short enough to notice a cancelled
// context's deadline promptly even through a proxy, long enough to re-poll rarely.
const pollSlice = 10 * time.Second

// WaitFor long-polls the event log from since until an event satisfies match, and returns it.
// ctx must carry a deadline: every wait in this project is bounded.
func (c *Client) WaitFor(ctx context.Context, since uint64, match func(api.Event) bool) (api.Event, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return api.Event{}, errors.New("wait for store event: the context has no deadline")
	}
	for {
		wait := time.Until(deadline)
		if wait > pollSlice {
			wait = pollSlice
		}
		if wait <= 0 {
			return api.Event{}, fmt.Errorf("wait for store event after seq %d: %w", since, context.DeadlineExceeded)
		}
		resp, err := c.Events(ctx, since, wait)
		if err != nil {
			if ctx.Err() != nil {
				return api.Event{}, fmt.Errorf("wait for store event after seq %d: %w", since, ctx.Err())
			}
			return api.Event{}, fmt.Errorf("wait for store event after seq %d: %w", since, err)
		}
		for _, e := range resp.Events {
			if match(e) {
				return e, nil
			}
			since = e.Seq
		}
		if len(resp.Events) == 0 && resp.LastSeq > since {
			// The events were reset away; resume from the newest one.
			since = resp.LastSeq
		}
	}
}

// Snapshot returns everything the store knows.
func (c *Client) Snapshot(ctx context.Context) (api.Snapshot, error) {
	var out api.Snapshot
	err := c.getJSON(ctx, api.TestPrefix+"snapshot", &out)
	return out, err
}

// OpenGate opens the store's start gate (api.GateResponse): the nodes waiting there start their
// processes. Opening an open gate is a no-op, so the call is retried like an idempotent one.
func (c *Client) OpenGate(ctx context.Context) error {
	var out api.GateResponse
	if err := c.sendJSON(ctx, http.MethodPost, api.TestPrefix+"gate", nil, http.StatusOK, &out, true); err != nil {
		return fmt.Errorf("open the start gate: %w", err)
	}
	return nil
}

// Gate reports whether the start gate is open, waiting up to wait (the server caps it) for it to
// open.
func (c *Client) Gate(ctx context.Context, wait time.Duration) (bool, error) {
	var out api.GateResponse
	path := fmt.Sprintf("%sgate?wait=%s", api.TestPrefix, url.QueryEscape(wait.String()))
	if err := c.getJSON(ctx, path, &out); err != nil {
		return false, fmt.Errorf("wait at the start gate: %w", err)
	}
	return out.Open, nil
}

// WaitGate long-polls the start gate until it opens. ctx must carry a deadline: every wait in
// this project is bounded.
func (c *Client) WaitGate(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		return errors.New("wait at the start gate: the context has no deadline")
	}
	for {
		wait := min(time.Until(deadline), pollSlice)
		if wait <= 0 {
			return fmt.Errorf("wait at the start gate: %w", context.DeadlineExceeded)
		}
		open, err := c.Gate(ctx, wait)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("wait at the start gate: %w", ctx.Err())
			}
			return err
		}
		if open {
			return nil
		}
	}
}

// Reset makes the store forget everything (state, records, events, faults).
func (c *Client) Reset(ctx context.Context) error {
	return c.sendJSON(ctx, http.MethodPost, api.TestPrefix+"reset", nil, http.StatusOK, nil, true)
}

// Sweep makes the store expire the clients whose TTL has passed, now.
func (c *Client) Sweep(ctx context.Context) error {
	return c.sendJSON(ctx, http.MethodPost, api.TestPrefix+"sweep", nil, http.StatusOK, nil, true)
}

// AddFault installs a fault and returns it with its id. Not retried once sent (a retry would
// install it twice).
func (c *Client) AddFault(ctx context.Context, f api.Fault) (api.Fault, error) {
	var out api.Fault
	if err := c.sendJSON(ctx, http.MethodPost, api.TestPrefix+"faults", f, http.StatusCreated, &out, false); err != nil {
		return out, fmt.Errorf("add fault %s: %w", f, err)
	}
	return out, nil
}

// Faults lists the active faults.
func (c *Client) Faults(ctx context.Context) ([]api.Fault, error) {
	var out []api.Fault
	err := c.getJSON(ctx, api.TestPrefix+"faults", &out)
	return out, err
}

// RemoveFault removes one fault.
func (c *Client) RemoveFault(ctx context.Context, id string) error {
	return c.sendJSON(ctx, http.MethodDelete, api.TestPrefix+"faults?id="+url.QueryEscape(id), nil, http.StatusOK, nil, true)
}

// ClearFaults removes every fault.
func (c *Client) ClearFaults(ctx context.Context) error {
	return c.sendJSON(ctx, http.MethodDelete, api.TestPrefix+"faults", nil, http.StatusOK, nil, true)
}
