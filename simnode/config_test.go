package simnode

import (
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/vllm"
)

const minimal = `{"commands":["vllm serve m"],"store":{"metadata":"http://s:8080","master":"http://s:50052","admin":"http://s:9003"}}`

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(minimal), "test", env(map[string]string{EnvHost: "r0-head"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Host != "r0-head" {
		t.Errorf("host %q, want it from %s", c.Host, EnvHost)
	}
	if time.Duration(c.Timeouts.Rendezvous) != DefaultRendezvousTimeout || time.Duration(c.Timeouts.Lookup) != DefaultLookupTimeout ||
		time.Duration(c.Timeouts.Store) != DefaultStoreTimeout {
		t.Errorf("timeouts %+v, want the defaults", c.Timeouts)
	}
	withHost := strings.Replace(minimal, `{`, `{"host":"cfg-host",`, 1)
	if c, err := ParseConfig([]byte(withHost), "test", env(map[string]string{EnvHost: "env-host"})); err != nil || c.Host != "cfg-host" {
		t.Errorf("config host: %v, %v; the config's host wins over the environment's", c, err)
	}
}

func TestParseProfile(t *testing.T) {
	pre, _ := vllm.ProfileNamed("pre-48061")
	for _, tc := range []struct {
		raw  string
		want string
	}{
		{``, "main"},
		{`"pre-48061"`, "pre-48061"},
		{`{"name":"custom","mooncake_dp_index":"legacy","nnodes_within_dp":"clamp","engine_id_dp_suffix":"global","dense_external_dp":"reject","engine_id_sync":"tp_pp","external_lb_rank":"explicit"}`, "custom"},
	} {
		p, err := parseProfile([]byte(tc.raw))
		if err != nil || p.Name != tc.want {
			t.Errorf("parseProfile(%s) = %+v, %v; want %s", tc.raw, p, err, tc.want)
		}
	}
	if p, _ := parseProfile([]byte(`"pre-48061"`)); p != pre {
		t.Errorf("named profile %+v, want %+v", p, pre)
	}
	for _, bad := range []string{`"nope"`, `{"name":"x","bogus":1}`, `42`} {
		if _, err := parseProfile([]byte(bad)); err == nil {
			t.Errorf("parseProfile(%s) accepted", bad)
		}
	}
}

func TestModelEnv(t *testing.T) {
	got := modelEnv([]string{"PATH=/bin", "VLLM_RPC_BASE_PATH=/run", "VLLM_DP_RANK=3", "MOONCAKE_CONFIG_PATH=/m.json", "HOME=/root", "BROKEN"},
		map[string]string{"VLLM_DP_RANK": "1", "VLLM_HOST_IP": "10.0.0.1"})
	want := map[string]string{"VLLM_RPC_BASE_PATH": "/run", "VLLM_DP_RANK": "1", "MOONCAKE_CONFIG_PATH": "/m.json", "VLLM_HOST_IP": "10.0.0.1"}
	if len(got) != len(want) {
		t.Fatalf("modelEnv = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestRuntimeFromEnv(t *testing.T) {
	rt, err := RuntimeFromEnv(env(map[string]string{EnvIPCRoot: "/run/h0", EnvHosts: "h0=127.0.0.2, h1=127.0.0.3"}))
	if err != nil || rt.ListenIP != "0.0.0.0" || rt.IPCRoot != "/run/h0" || rt.Hosts["h1"] != "127.0.0.3" {
		t.Fatalf("RuntimeFromEnv = %+v, %v", rt, err)
	}
	for name, e := range map[string]map[string]string{
		"relative root":   {EnvIPCRoot: "run/h0"},
		"listen ip":       {EnvListenIP: "host"},
		"hosts pair":      {EnvHosts: "h0"},
		"hosts ip":        {EnvHosts: "h0=300.1.1.1"},
		"hosts conflict":  {EnvHosts: "h0=127.0.0.2,h0=127.0.0.3"},
		"hosts bad label": {EnvHosts: "h_0=127.0.0.2"},
	} {
		if _, err := RuntimeFromEnv(env(e)); err == nil {
			t.Errorf("%s: %v accepted", name, e)
		}
	}
}
