package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/widetp/widetp/fakestore/api"
)

// call runs one master operation. out must embed api.Result; a non-zero error_code is returned
// as *api.CodeError (see api.IsCode).
func (c *Client) call(ctx context.Context, op string, in any, out interface{ result() api.Result }, idempotent bool) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("master %s: encode: %w", op, err)
	}
	status, rb, err := c.do(ctx, http.MethodPost, c.master, api.MasterPathPrefix+op, body, idempotent)
	if err != nil {
		return fmt.Errorf("master %s: %w", op, err)
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("master %s: HTTP %d, undecodable answer %q: %w", op, status, rb, err)
	}
	if status != http.StatusOK {
		res := out.result()
		return &api.CodeError{Op: op, Code: res.ErrorCode, Message: fmt.Sprintf("HTTP %d: %s", status, res.Message)}
	}
	return out.result().Err(op)
}

type resultOnly struct{ api.Result }

func (r *resultOnly) result() api.Result { return r.Result }

type serviceReady struct{ api.ServiceReadyResponse }

func (r *serviceReady) result() api.Result { return r.Result }

type ping struct{ api.PingResponse }

func (r *ping) result() api.Result { return r.Result }

type batchExist struct{ api.BatchExistKeyResponse }

func (r *batchExist) result() api.Result { return r.Result }

type replicas struct{ api.ReplicasResponse }

func (r *replicas) result() api.Result { return r.Result }

type removeAll struct{ api.RemoveAllResponse }

func (r *removeAll) result() api.Result { return r.Result }

// ServiceReady asks whether the master serves.
func (c *Client) ServiceReady(ctx context.Context) (bool, error) {
	var out serviceReady
	err := c.call(ctx, api.OpServiceReady, struct{}{}, &out, true)
	return out.Ready, err
}

// MountSegment mounts a segment (idempotent per segment id).
func (c *Client) MountSegment(ctx context.Context, clientID string, seg api.Segment) error {
	var out resultOnly
	return c.call(ctx, api.OpMountSegment, api.MountSegmentRequest{ClientID: clientID, Segment: seg}, &out, true)
}

// ReMountSegment re-mounts a client's segments (after a Ping answered NEED_REMOUNT).
func (c *Client) ReMountSegment(ctx context.Context, clientID string, segs []api.Segment) error {
	var out resultOnly
	return c.call(ctx, api.OpReMountSegment, api.ReMountSegmentRequest{ClientID: clientID, Segments: segs}, &out, true)
}

// UnmountSegment unmounts a segment (idempotent).
func (c *Client) UnmountSegment(ctx context.Context, clientID, segmentID string) error {
	var out resultOnly
	return c.call(ctx, api.OpUnmountSegment, api.UnmountSegmentRequest{ClientID: clientID, SegmentID: segmentID}, &out, true)
}

// Ping is a client's heartbeat; ClientStatus says whether it must remount.
func (c *Client) Ping(ctx context.Context, clientID string) (api.PingResponse, error) {
	var out ping
	err := c.call(ctx, api.OpPing, api.PingRequest{ClientID: clientID}, &out, true)
	return out.PingResponse, err
}

// BatchExistKey reports, per key, whether a complete object exists (granting it a read lease).
func (c *Client) BatchExistKey(ctx context.Context, keys []string) ([]bool, error) {
	var out batchExist
	if err := c.call(ctx, api.OpBatchExistKey, api.KeysRequest{Keys: keys}, &out, true); err != nil {
		return nil, err
	}
	if len(out.Results) != len(keys) {
		return nil, fmt.Errorf("master %s: %d results for %d keys", api.OpBatchExistKey, len(out.Results), len(keys))
	}
	exists := make([]bool, len(keys))
	for i, r := range out.Results {
		exists[i] = r.Exists
	}
	return exists, nil
}

// PutStart allocates replicas for a new object. Not retried once sent: a second PutStart of the
// same key answers OBJECT_ALREADY_EXISTS.
func (c *Client) PutStart(ctx context.Context, req api.PutStartRequest) ([]api.Replica, error) {
	var out replicas
	err := c.call(ctx, api.OpPutStart, req, &out, false)
	return out.Replicas, err
}

// PutEnd completes an object's replicas.
func (c *Client) PutEnd(ctx context.Context, clientID, key string) error {
	var out resultOnly
	return c.call(ctx, api.OpPutEnd, api.KeyRequest{ClientID: clientID, Key: key}, &out, false)
}

// PutRevoke abandons an object whose put has not completed.
func (c *Client) PutRevoke(ctx context.Context, clientID, key string) error {
	var out resultOnly
	return c.call(ctx, api.OpPutRevoke, api.KeyRequest{ClientID: clientID, Key: key}, &out, false)
}

// GetReplicaList returns an object's complete replicas and grants it a read lease.
func (c *Client) GetReplicaList(ctx context.Context, key string) (api.ReplicasResponse, error) {
	var out replicas
	err := c.call(ctx, api.OpGetReplicaList, api.KeyRequest{Key: key}, &out, true)
	return out.ReplicasResponse, err
}

// Remove deletes an object; without force a leased object answers OBJECT_HAS_LEASE.
func (c *Client) Remove(ctx context.Context, key string, force bool) error {
	var out resultOnly
	return c.call(ctx, api.OpRemove, api.KeyRequest{Key: key, Force: force}, &out, false)
}

// RemoveAll deletes every complete object whose lease has expired (every complete one if force)
// and returns how many.
func (c *Client) RemoveAll(ctx context.Context, force bool) (int64, error) {
	var out removeAll
	err := c.call(ctx, api.OpRemoveAll, api.RemoveAllRequest{Force: force}, &out, true)
	return out.Removed, err
}
