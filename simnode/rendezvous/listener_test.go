package rendezvous

import (
	"context"
	"errors"
	"syscall"
	"testing"
)

// A front end binds its handshake before it starts the engines that join it
// (vllm/v1/engine/utils.py launch_core_engines): members that connect between the bind and the
// barrier wait in the backlog, and a second binder of the address fails at once.
func TestListenBindsAheadOfTheBarrier(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	addr := freeAddr(t)
	ms := members("dp", addr, 2, 0, 1)
	l, err := Listen(ctx, ms[0], cfg(timeout))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer l.Close()

	_, err = Listen(ctx, ms[0], cfg(timeout))
	var be *BindError
	if !errors.As(err, &be) || !errors.Is(err, syscall.EADDRINUSE) || be.Address != addr {
		t.Fatalf("second Listen at %s: %v, want a *BindError with EADDRINUSE", addr, err)
	}

	joined := make(chan error, 1)
	go func() {
		ms[1].Value = "one"
		_, err := Join(ctx, ms[1], cfg(timeout))
		joined <- err
	}()
	res, err := l.Join(ctx, "zero", cfg(timeout))
	if err != nil {
		t.Fatalf("Listener.Join: %v", err)
	}
	if err := <-joined; err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	if res.Values[0] != "zero" || res.Values[1] != "one" {
		t.Errorf("values %v", res.Values)
	}
	// The barrier is over and its socket released: the address binds again.
	again, err := Listen(ctx, ms[0], cfg(timeout))
	if err != nil {
		t.Fatalf("Listen after the barrier: %v", err)
	}
	again.Close()
}

func TestListenIsRank0Only(t *testing.T) {
	m := members("dp", freeAddr(t), 2, 1)[0]
	if _, err := Listen(context.Background(), m, cfg(timeout)); err == nil {
		t.Fatal("Listen as rank 1 succeeded")
	}
	if _, err := Listen(context.Background(), members("dp", freeAddr(t), 2, 0)[0], Config{}); err == nil {
		t.Fatal("Listen without a timeout succeeded")
	}
}
