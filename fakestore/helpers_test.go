package fakestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
)

// start runs a server on loopback ports chosen by the kernel and a client for it; both are
// closed when the test ends.
func start(t testing.TB, cfg fakestore.Config) (*fakestore.Server, *client.Client) {
	t.Helper()
	cfg.MetadataAddr, cfg.MasterAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	s, err := fakestore.New(cfg)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	c, err := client.New(client.WithMetadataURL(s.URL(api.PlaneMetadata)), client.WithMasterURL(s.URL(api.PlaneMaster)),
		client.WithAdminURL(s.URL(api.PlaneAdmin)))
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return s, c
}

// bounded returns a context that ends the test's waits after d.
func bounded(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func isDuplicate(err error) bool { return client.IsDuplicate(err) }

func isNotFound(err error) bool { return errors.Is(err, client.ErrNotFound) }

func parkedOne(tb testing.TB, s *fakestore.Server) { fakestore.WaitParked(tb, s) }
