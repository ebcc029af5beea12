package simnode

import (
	"context"
	"testing"
)

func TestResolver(t *testing.T) {
	local := Runtime{ListenIP: "127.0.0.3", Hosts: map[string]string{"r0-head": "127.0.0.2", "r0-follower": "127.0.0.3"}}
	container := Runtime{ListenIP: "0.0.0.0"}
	cases := []struct {
		name string
		rt   Runtime
		host string
		want string
	}{
		{"a mapped host", local, "r0-head", "127.0.0.2"},
		{"the host itself", local, "r0-follower", "127.0.0.3"},
		// vllm/envs.py: VLLM_DP_MASTER_IP defaults to 127.0.0.1, meaning this host.
		{"loopback is this host in a local run", local, "127.0.0.1", "127.0.0.3"},
		{"localhost is this host in a local run", local, "localhost", "127.0.0.3"},
		{"loopback stays loopback in a container", container, "127.0.0.1", "127.0.0.1"},
		{"an IP as it is", container, "10.1.2.3", "10.1.2.3"},
	}
	for _, tc := range cases {
		got, err := tc.rt.resolver()(context.Background(), tc.host)
		if err != nil || got != tc.want {
			t.Errorf("%s: resolve %q = %q, %v; want %q", tc.name, tc.host, got, err, tc.want)
		}
	}
	if _, err := local.resolver()(context.Background(), "no-such-host.invalid"); err == nil {
		t.Error("an unknown name resolved")
	}
}
