package conform

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

// The generated deployments' models: one MoE and one dense model the scenario catalog knows, so a
// written scenario needs no moe: line.
var (
	moeModel   = vllm.Model{Name: "deepseek-ai/DeepSeek-V3", MoE: true}
	denseModel = vllm.Model{Name: "meta-llama/Llama-3.1-8B-Instruct", MoE: false}
)

const mooncakeKV = `'{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`

// launchPaths are the generators, one per launch path; deployment i uses path i mod len, so N >=
// len(launchPaths) covers every path, and the seed varies sizes, ranks, model and connector.
var launchPaths = []struct {
	name string
	gen  func(g *gen)
}{
	{"internal-one-node", genInternalOneNode},
	{"internal-headless", genInternalHeadless},
	{"external", genExternal},
	{"hybrid", genHybrid},
	{"wide-tp-internal", genWideTPInternal},
	{"wide-tp-external", genWideTPExternal},
	{"wide-tp-start-rank", genWideTPStartRank},
	{"colocated-external", genColocated},
	{"external-shared-nodes", genExternalSharedNodes},
	{"disaggregated", genDisaggregated},
	{"multi-port-external", genMultiPort},
	{"invalid", genInvalid},
	{"offline-spmd", genOfflineSPMD},
	{"api-server-entrypoint", genAPIServer},
	{"mismatched-config", genMismatchedConfig},
}

// LaunchPaths names the launch paths Generate covers, in its order.
func LaunchPaths() []string {
	out := make([]string, len(launchPaths))
	for i, p := range launchPaths {
		out[i] = p.name
	}
	return out
}

// gen builds one deployment.
type gen struct {
	r    *rand.Rand
	d    vllm.Deployment
	gpus int
	kv   bool
	// ep: every line of a MoE deployment passes --enable-expert-parallel, or none does; the
	// mismatched-config path gives the followers other flags on purpose (vLLM refuses DP engines
	// whose configs hash differently: wait_for_engine_startup's config-hash check).
	ep bool
	// kvConfig is the deployment's --kv-transfer-config value; env its nodes' environment.
	kvConfig string
	env      map[string]string
	// kvEvents is the deployment's --kv-events-config flag and value ("" for none).
	kvEvents string
	// respell: every line spells its flags another way vLLM's parser accepts (aliases, long
	// names with = or underscores, abbreviations); see spell.
	respell bool
	// defaultRPCPort: the multi-node lines leave --data-parallel-rpc-port out (vLLM's default).
	defaultRPCPort bool
}

// Generate returns n deployments, reproducible from seed, under profile prof.
func Generate(n int, seed string, prof vllm.Profile) []vllm.Deployment {
	out := make([]vllm.Deployment, 0, n)
	for i := 0; i < n; i++ {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d", seed, i)
		s := h.Sum64()
		path := launchPaths[i%len(launchPaths)]
		g := &gen{r: rand.New(rand.NewPCG(s, s>>1|1)), gpus: 8}
		name := fmt.Sprintf("gen-%s-%d-%s", sanitize(seed), i, path.name)
		g.d = vllm.Deployment{Name: name, Profile: prof, Seed: name, Model: moeModel}
		if g.r.IntN(3) == 0 {
			g.d.Model = denseModel
		}
		g.kv = g.r.IntN(2) == 0
		g.ep = g.d.Model.MoE && g.r.IntN(2) == 0
		g.kvConfig = mooncakeKV
		if g.r.IntN(2) == 0 {
			g.kvConfig = kvConfigs[g.r.IntN(len(kvConfigs))]
		}
		g.env = nodeEnvs[0]
		if g.r.IntN(3) == 0 {
			g.env = nodeEnvs[g.r.IntN(len(nodeEnvs))]
		}
		if strings.Contains(g.kvConfig, `"p2p"`) {
			// A P2P offload tier refuses to start without PYTHONHASHSEED (P2PSecondaryTierManager,
			// vllm/v1/kv_offload/tiering/p2p/manager.py), which the probe does not build: the
			// nodes set it, as the tier's own deployments do.
			g.env = maps.Clone(g.env)
			g.env["PYTHONHASHSEED"] = "0"
		}
		if g.r.IntN(3) == 0 {
			g.kvEvents = kvEventsConfigs[g.r.IntN(len(kvEventsConfigs))]
		}
		g.respell = g.r.IntN(4) == 0
		g.defaultRPCPort = g.r.IntN(4) == 0
		path.gen(g)
		g.maybeRustFrontend()
		g.maybeGraphMode()
		g.maybeContextParallel()
		out = append(out, g.d)
	}
	return out
}

func sanitize(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

func (g *gen) pick(xs ...int) int { return xs[g.r.IntN(len(xs))] }

// line is one `vllm serve` line of the deployment's model with the connector when chosen.
func (g *gen) line(env string, flags ...string) string {
	parts := []string{}
	if env != "" {
		parts = append(parts, env)
	}
	parts = append(parts, "vllm serve", g.d.Model.Name)
	for _, fl := range flags {
		if fl != "" {
			parts = append(parts, fl)
		}
	}
	if g.ep {
		parts = append(parts, "--enable-expert-parallel")
	}
	if g.kv {
		parts = append(parts, "--kv-transfer-config", g.kvConfig)
	}
	if g.kvEvents != "" {
		parts = append(parts, g.kvEvents)
	}
	line := strings.Join(parts, " ")
	if g.respell {
		line = g.spell(line)
	}
	return line
}

// spellings are the names vLLM's parser takes for one flag (EngineArgs.add_cli_args in
// vllm/engine/arg_utils.py): the long name first, then its aliases. A long name may also be
// written with underscores (FlexibleArgumentParser, vllm/utils/argparse_utils.py) and joined to
// its value with =.
var spellings = [][]string{
	{"--tensor-parallel-size", "-tp"},
	{"--pipeline-parallel-size", "-pp"},
	{"--data-parallel-size", "-dp"},
	{"--data-parallel-rank", "-dpn"},
	{"--data-parallel-start-rank", "-dpr"},
	{"--data-parallel-size-local", "-dpl"},
	{"--data-parallel-address", "-dpa"},
	{"--data-parallel-rpc-port", "-dpp"},
	{"--data-parallel-hybrid-lb", "-dph"},
	{"--data-parallel-external-lb", "-dpe"},
	{"--data-parallel-multi-port-external-lb", "-dpm"},
	{"--enable-expert-parallel", "-ep"},
	{"--nnodes", "-n"},
	{"--node-rank", "-r"},
	{"--api-server-count"},
	{"--master-addr"},
	{"--master-port"},
	{"--kv-transfer-config"},
}

// boolFlags take no value.
var boolFlags = map[string]bool{"--data-parallel-hybrid-lb": true, "--data-parallel-external-lb": true,
	"--data-parallel-multi-port-external-lb": true, "--enable-expert-parallel": true}

// abbreviation is a prefix of the long flag name that no other flag of vLLM's parser starts with
// (argparse's allow_abbrev, which FlexibleArgumentParser keeps), extra characters longer than the
// shortest such prefix; "" when the name has none (it is a prefix of another flag). The Go
// parser's catalog (vllm.KnownFlags) stands for vLLM's here: a prefix vLLM finds ambiguous
// because the catalog lacks a flag shows as a disagreement.
func abbreviation(name string, extra int) string {
	for l := len("--") + 1; l < len(name); l++ {
		prefix := name[:l]
		unique := true
		for _, o := range longNames() {
			if o != name && strings.HasPrefix(o, prefix) {
				unique = false
				break
			}
		}
		if unique {
			return name[:min(l+extra, len(name))]
		}
	}
	return ""
}

// longNames are the long names vLLM's parser knows (the Go catalog's), with the --no- form of
// each negatable flag.
var longNames = sync.OnceValue(func() []string {
	var out []string
	for _, fi := range vllm.KnownFlags() {
		for _, n := range fi.Names {
			if strings.HasPrefix(n, "--") {
				out = append(out, n)
				if fi.Negatable {
					out = append(out, "--no-"+n[2:])
				}
			}
		}
	}
	return out
})

// spellingOf maps every spelling of spellings to its flag's names.
var spellingOf = sync.OnceValue(func() map[string][]string {
	m := map[string][]string{}
	for _, names := range spellings {
		for _, n := range names {
			m[n] = names
		}
	}
	return m
})

// spell rewrites each flag of a generated line (its tokens are split on spaces: no generated value
// holds one) into another spelling of the same flag: an alias, the long name, the long name with
// underscores or abbreviated, a long name joined to its value with =. What the line means is
// unchanged; the Go parser and vLLM's must both read it so.
func (g *gen) spell(line string) string {
	long := spellingOf()
	toks := strings.Fields(line)
	var out []string
	for i := 0; i < len(toks); i++ {
		names, ok := long[toks[i]]
		if !ok {
			out = append(out, toks[i])
			continue
		}
		name := names[g.r.IntN(len(names))]
		if strings.HasPrefix(name, "--") {
			switch g.r.IntN(4) {
			case 0:
				name = "--" + strings.ReplaceAll(name[2:], "-", "_")
			case 1:
				if a := abbreviation(name, g.r.IntN(3)); a != "" {
					name = a
				}
			}
		}
		if !boolFlags[names[0]] && i+1 < len(toks) && strings.HasPrefix(name, "--") && g.r.IntN(2) == 0 {
			out = append(out, name+"="+toks[i+1])
			i++
			continue
		}
		out = append(out, name)
	}
	return strings.Join(out, " ")
}

// kvEventsConfigs are the KV event publisher settings a deployment may use: the default wildcard
// endpoint, another port with a replay socket, the dotted form, a connect endpoint, an ipc and an
// inproc one (which ZmqEventPublisher cannot offset past DP index 0, or suffixes), port 0 (offset
// or left to the kernel: the kv_events_port_zero change), and events configured but off.
var kvEventsConfigs = []string{
	`--kv-events-config '{"enable_kv_cache_events":true}'`,
	`--kv-events-config '{"enable_kv_cache_events":true,"endpoint":"tcp://*:6100","replay_endpoint":"tcp://*:6200"}'`,
	`--kv-events-config.enable_kv_cache_events true --kv-events-config.topic kv`,
	`--kv-events-config '{"enable_kv_cache_events":true,"endpoint":"tcp://localhost:5557"}'`,
	`--kv-events-config '{"enable_kv_cache_events":true,"endpoint":"ipc:///tmp/kv_events"}'`,
	`--kv-events-config '{"enable_kv_cache_events":true,"endpoint":"inproc://kv"}'`,
	`--kv-events-config '{"enable_kv_cache_events":true,"endpoint":"tcp://*:0"}'`,
	`--kv-events-config '{"publisher":"zmq"}'`,
}

// kvConfigs are the connector configurations a deployment may use: the Mooncake store connector
// alone, with a lookup port, with lookups off, inside a MultiConnector (after a child without HMA
// support, where VllmConfig.__post_init__'s HMA block stops asking; in a MultiConnector nested in
// another; after a layerwise LMCache child, where its CUDA graph check stops asking), and three
// without Mooncake (NIXL pull and push, the OffloadingConnector with a P2P tier).
var kvConfigs = []string{
	mooncakeKV,
	`'{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{"lookup_rpc_port":7788}}'`,
	`'{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"enable_lookup":false}}'`,
	`'{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"},{"kv_connector":"NixlConnector","kv_role":"kv_both"}]}}'`,
	`'{"kv_connector":"NixlConnector","kv_role":"kv_both","engine_id":"fixed-engine"}'`,
	`'{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"},{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}]}}'`,
	`'{"kv_connector":"NixlPushConnector","kv_role":"kv_producer"}'`,
	`'{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{"lookup_rpc_port":7789}}]}}]}}'`,
	`'{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both","kv_connector_extra_config":{"use_layerwise":true}},{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}]}}'`,
	`'{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":209715200,"secondary_tiers":[{"type":"p2p","host":"127.0.0.1","port":7777}]}}'`,
}

// nodeEnvs are node environments that change what identity reads: the ipc base path, the host
// address a store client registers, its override.
var nodeEnvs = []map[string]string{
	{},
	{"VLLM_RPC_BASE_PATH": "/dev/shm/vllm"},
	{"VLLM_HOST_IP": "10.1.2.3"},
	{"MOONCAKE_REQUESTER_LOCAL_HOSTNAME": "rdma-host"},
	{"TMPDIR": "/var/tmp/"},
	// run_multi_api_server refuses it with more than one API server.
	{"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true"},
	// get_open_ports_list scans from it.
	{"VLLM_PORT": "5678"},
}

func (g *gen) node(host string, lines ...string) {
	env := map[string]string{}
	for k, v := range g.env {
		env[k] = v
	}
	g.d.Nodes = append(g.d.Nodes, vllm.Node{Host: host, GPUs: g.gpus, Env: env, Commands: lines})
}

func host(i int) string { return fmt.Sprintf("h%d", i) }

func f(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// head is the DP address flags a multi-node command names: the head's address, and its RPC port
// unless the deployment keeps vLLM's default (ParallelConfig.data_parallel_rpc_port).
func (g *gen) head() string {
	if g.defaultRPCPort {
		return "--data-parallel-address h0"
	}
	return "--data-parallel-address h0 --data-parallel-rpc-port 13345"
}

// wideHead is head() for a line that names --master-addr h0: create_engine_config
// (vllm/engine/arg_utils.py) takes the DP address from --master-addr when
// --data-parallel-address is left out (omitAddress).
func (g *gen) wideHead(omitAddress bool) string {
	if !omitAddress {
		return g.head()
	}
	if g.defaultRPCPort {
		return ""
	}
	return "--data-parallel-rpc-port 13345"
}

func genInternalOneNode(g *gen) {
	tp := g.pick(1, 2, 4)
	pp := g.pick(1, 1, 2)
	dp := g.pick(1, 2, 4)
	for tp*pp*dp > g.gpus {
		dp /= 2
	}
	flags := []string{f("-tp %d -pp %d -dp %d", tp, pp, dp)}
	if g.r.IntN(3) == 0 {
		flags = append(flags, f("--data-parallel-size-local %d", dp))
	}
	if g.r.IntN(3) == 0 {
		// 0 runs the headless launcher without --headless (ServeSubcommand.cmd in
		// vllm/entrypoints/cli/serve.py), 2 a second API server.
		flags = append(flags, f("--api-server-count %d", g.pick(0, 1, 2)))
	}
	if g.r.IntN(4) == 0 {
		// uni runs one worker at rank 0 whatever the world size (UniProcExecutor._distributed_args
		// in vllm/v1/executor/uniproc_executor.py); mp is the default made explicit.
		flags = append(flags, "--distributed-executor-backend "+[]string{"uni", "mp"}[g.r.IntN(2)])
	}
	env := ""
	if g.r.IntN(3) == 0 {
		env = g.narrowDevices(tp*pp, dp)
	}
	g.node("h0", g.line(env, flags...))
	g.maybeGRPC()
}

// maybeGRPC serves gRPC instead of HTTP on every line of the deployment, one time in five:
// ServeSubcommand.cmd's first branch, serve_grpc (vllm/entrypoints/grpc_server.py), or half of
// those times the module's own entrypoint, `python -m vllm.entrypoints.grpc_server --model M`,
// where its parser takes the line's flags (it has no frontend option). Drawn last, so that the
// rest of the deployment is the one the seed gave before.
func (g *gen) maybeGRPC() {
	if g.r.IntN(5) != 0 {
		return
	}
	module := g.r.IntN(2) == 0
	for i := range g.d.Nodes {
		for j, line := range g.d.Nodes[i].Commands {
			if module {
				l := strings.Replace(line, "vllm serve "+g.d.Model.Name, "python -m vllm.entrypoints.grpc_server --model "+g.d.Model.Name, 1)
				if _, err := vllm.ParseServe(l); err == nil {
					g.d.Nodes[i].Commands[j] = l
					continue
				}
			}
			g.d.Nodes[i].Commands[j] += " --grpc"
		}
	}
}

// maybeRustFrontend gives every node the Rust front end, one deployment in six
// (VLLM_USE_RUST_FRONTEND=1: ServeSubcommand.cmd after its gRPC branch, run_multi_api_server),
// with the binary named or left to vLLM's "auto" (vllm-rs beside envs.py, which a source tree
// lacks: FileNotFoundError). Drawn after the launch path, so that the rest of the deployment is
// the one the seed gave before.
func (g *gen) maybeRustFrontend() {
	if g.r.IntN(6) != 0 {
		return
	}
	named := g.r.IntN(3) != 0
	for i := range g.d.Nodes {
		g.d.Nodes[i].Env["VLLM_USE_RUST_FRONTEND"] = "1"
		if named {
			g.d.Nodes[i].Env["VLLM_RUST_FRONTEND_PATH"] = "/opt/vllm-rs/bin/vllm-rs"
		}
	}
}

// graphModes are flags that change the CUDA graph mode VllmConfig.__post_init__ holds at its KV
// connector check (vllm/config/vllm.py): none, piecewise only, full only without compilation, and
// a full mode --enforce-eager overrides.
var graphModes = []string{"--enforce-eager", "-O1", "-O0", "-cc.mode none", `-cc '{"mode":0,"cudagraph_mode":"full_decode_only"}'`, "--enforce-eager -cc.cudagraph_mode full"}

// maybeGraphMode gives one deployment in five a CUDA graph mode other than the default (full and
// piecewise) on every line; drawn last, so the rest of the deployment is what the seed gave it.
func (g *gen) maybeGraphMode() { g.maybeEveryLine(5, graphModes) }

// maybeEveryLine appends one of choices to every line of one deployment in oneIn, and returns
// what it appended ("" when nothing).
func (g *gen) maybeEveryLine(oneIn int, choices []string) string {
	if g.r.IntN(oneIn) != 0 {
		return ""
	}
	flags := choices[g.r.IntN(len(choices))]
	for i := range g.d.Nodes {
		for j, c := range g.d.Nodes[i].Commands {
			g.d.Nodes[i].Commands[j] = c + " " + flags
		}
	}
	return flags
}

// contextParallels are the context-parallel settings a deployment may add to every line: decode
// context parallelism inside the TP group (ParallelConfig's validator requires it to divide the TP
// size, vllm/config/parallel.py), prefill context parallelism (a factor of every engine's world
// size, which that validator refuses with DP > 1), and both.
var contextParallels = []string{"-dcp 2", "-dcp 4", "--decode-context-parallel-size 8", "-pcp 2", "-pcp 2 -dcp 2", "--prefill-context-parallel-size=2"}

// maybeContextParallel gives one deployment in eight a context-parallel setting on every line;
// drawn last, so the rest of the deployment is what the seed gave it. Prefill context parallelism
// multiplies every engine's world: where the deployment's nodes then lack the GPUs, it keeps its
// lines as they were (a scenario that needs more GPUs than its nodes have does not load, and a
// generated deployment must replay from its file).
func (g *gen) maybeContextParallel() {
	cp := g.maybeEveryLine(8, contextParallels)
	if cp == "" || loads(g.d) {
		return
	}
	for i := range g.d.Nodes {
		for j, c := range g.d.Nodes[i].Commands {
			g.d.Nodes[i].Commands[j] = strings.TrimSuffix(c, " "+cp)
		}
	}
}

// loads says whether d, written as a scenario file under main (as TestGeneratedScenariosLoad
// writes them), loads: PCP can fail the loader's GPU checks (vLLM's device count, or a node's
// workers over its GPUs).
func loads(d vllm.Deployment) bool {
	b, err := ScenarioYAML(d, "main", nil)
	if err != nil {
		return false
	}
	_, err = scenarios.Parse(d.Name+".yaml", b)
	return err == nil
}

// narrowDevices is a CUDA_VISIBLE_DEVICES= prefix that shows a node's engines (each a world of
// world devices) fewer devices than they need, though enough for one world (the scenario loader
// refuses a world larger than the node's devices): a worker whose DP-adjusted local rank is past
// them raises in Worker.init_device (vllm/v1/worker/gpu_worker.py), before its torch world. ""
// when the node runs one engine.
func (g *gen) narrowDevices(world, engines int) string {
	if engines < 2 {
		return ""
	}
	n := world * (1 + g.r.IntN(engines-1))
	return visibleDevices(g.gpus-n, n)
}

// visibleDevices is a CUDA_VISIBLE_DEVICES= prefix naming n devices from first.
func visibleDevices(first, n int) string {
	devs := make([]string, n)
	for i := range devs {
		devs[i] = fmt.Sprint(first + i)
	}
	return "CUDA_VISIBLE_DEVICES=" + strings.Join(devs, ",")
}

func genInternalHeadless(g *gen) {
	nodes := g.pick(2, 3)
	local := g.pick(1, 2)
	tp := g.pick(2, 4)
	dp := nodes * local
	// One deployment in three lays the DP ranks out with --nnodes and --node-rank instead:
	// create_engine_config (vllm/engine/arg_utils.py) infers each node's local DP size and its
	// first rank from them, and the DP address from --master-addr when none is given.
	nnodes := g.r.IntN(3) == 0
	omitAddress := nnodes && g.r.IntN(2) == 0
	if !nnodes && g.r.IntN(4) == 0 {
		g.apiOnlyHead(nodes, local, tp)
		return
	}
	for i := 0; i < nodes; i++ {
		var flags []string
		if nnodes {
			flags = []string{f("-tp %d -dp %d --nnodes %d --node-rank %d --master-addr h0", tp, dp, nodes, i), g.wideHead(omitAddress)}
			if i > 0 {
				flags = append(flags, "--headless")
			}
			g.node(host(i), g.line("", flags...))
			continue
		}
		flags = []string{f("-tp %d -dp %d --data-parallel-size-local %d", tp, dp, local), g.head()}
		if i == 0 {
			// vLLM PR #47692: a head given start rank 0 infers hybrid LB (then external LB when
			// its local size is 1), which the headless followers then do not fit.
			if g.r.IntN(3) == 0 {
				flags = append(flags, "--data-parallel-start-rank 0")
			}
		} else {
			flags = append(flags, "--headless", f("--data-parallel-start-rank %d", i*local))
		}
		g.node(host(i), g.line("", flags...))
	}
}

// apiOnlyHead is a head that runs front ends only (--data-parallel-size-local 0: no engine of its
// own, ParallelConfig.__post_init__ still sets up the DP master) and nodes-1 --headless followers
// that run every engine, local of them each from their start rank; one head in three runs two
// API servers.
func (g *gen) apiOnlyHead(nodes, local, tp int) {
	dp := (nodes - 1) * local
	head := []string{f("-tp %d -dp %d --data-parallel-size-local 0", tp, dp), g.head()}
	if g.r.IntN(3) == 0 {
		head = append(head, "--api-server-count 2")
	}
	g.node(host(0), g.line("", head...))
	for i := 1; i < nodes; i++ {
		g.node(host(i), g.line("", f("-tp %d -dp %d --data-parallel-size-local %d", tp, dp, local), g.head(),
			"--headless", f("--data-parallel-start-rank %d", (i-1)*local)))
	}
}

// genMismatchedConfig is an internal-LB head with --headless followers whose parallel flags
// differ from the head's on one node: expert parallelism on the head only, or EPLB, or another TP
// size. With a MoE model the front end refuses the follower's READY (the config hash); with a
// dense one nothing checks it.
func genMismatchedConfig(g *gen) {
	nodes := g.pick(2, 3)
	local := g.pick(1, 2)
	tp := g.pick(2, 4)
	dp := nodes * local
	odd := 1 + g.r.IntN(nodes-1)
	diff := []string{"--enable-expert-parallel", "--enable-eplb", f("-tp %d", tp/2)}[g.r.IntN(3)]
	g.ep = false
	for i := 0; i < nodes; i++ {
		flags := []string{f("-tp %d -dp %d --data-parallel-size-local %d", tp, dp, local), g.head()}
		if i > 0 {
			flags = append(flags, "--headless", f("--data-parallel-start-rank %d", i*local))
		}
		if i == odd {
			flags = append(flags, diff)
		}
		g.node(host(i), g.line("", flags...))
	}
}

func genExternal(g *gen) {
	dp := g.pick(2, 3, 4)
	tp := g.pick(2, 4, 8)
	for i := 0; i < dp; i++ {
		flags := []string{f("-tp %d -dp %d --data-parallel-rank %d", tp, dp, i), g.head()}
		if g.r.IntN(3) == 0 {
			flags = append(flags, "--data-parallel-external-lb")
		}
		g.node(host(i), g.line("", flags...))
	}
	g.maybeGRPC()
}

func genHybrid(g *gen) {
	nodes := g.pick(2, 3)
	local := g.pick(1, 2, 4)
	tp := g.pick(1, 2)
	dp := nodes * local
	for i := 0; i < nodes; i++ {
		flags := []string{f("-tp %d -dp %d --data-parallel-size-local %d --data-parallel-start-rank %d", tp, dp, local, i*local), g.head()}
		if g.r.IntN(4) == 0 {
			flags = append(flags, "--data-parallel-hybrid-lb")
		}
		env := ""
		if g.r.IntN(4) == 0 {
			env = g.narrowDevices(tp, local)
		}
		g.node(host(i), g.line(env, flags...))
	}
}

// wideTP lays out replicas of perReplica nodes each, node rank k on host k. A replica's world
// (TP x PP) spans its nodes: wide TP (PP 1), or one deployment in three a pipeline of
// perReplica stages, each a node's TP group.
func (g *gen) wideTP(flagsFor func(k, replica, within int) []string) {
	perReplica := g.pick(2, 2, 3)
	dp := g.pick(1, 2, 2)
	if g.r.IntN(3) == 0 {
		g.gpus = 4
	}
	tp, pp := perReplica*g.gpus, 1
	if g.r.IntN(3) == 0 {
		tp, pp = g.gpus, perReplica
	}
	omitAddress := g.r.IntN(3) == 0
	nnodes := perReplica * dp
	for k := 0; k < nnodes; k++ {
		flags := []string{f("-tp %d", tp)}
		if pp > 1 {
			flags = append(flags, f("-pp %d", pp))
		}
		flags = append(flags, f("-dp %d --nnodes %d --node-rank %d --master-addr h0 --master-port 29600", dp, nnodes, k), g.wideHead(omitAddress))
		flags = append(flags, flagsFor(k, k/perReplica, k%perReplica)...)
		g.node(host(k), g.line("", flags...))
	}
}

func genWideTPInternal(g *gen) {
	g.wideTP(func(k, replica, within int) []string {
		if k > 0 {
			return []string{"--headless"}
		}
		return nil
	})
}

func genWideTPExternal(g *gen) {
	explicit := g.r.IntN(2) == 0
	g.wideTP(func(k, replica, within int) []string {
		var out []string
		if explicit {
			out = append(out, f("--data-parallel-rank %d", replica))
		} else {
			out = append(out, "--data-parallel-external-lb")
		}
		if within > 0 {
			out = append(out, "--headless")
		}
		return out
	})
}

func genWideTPStartRank(g *gen) {
	g.wideTP(func(k, replica, within int) []string {
		out := []string{f("--data-parallel-start-rank %d", replica), "--data-parallel-size-local 1"}
		if within > 0 {
			out = append(out, "--headless")
		}
		return out
	})
}

func genColocated(g *gen) {
	tp := g.pick(2, 4)
	n := g.gpus / tp
	if n > 2 {
		n = 2
	}
	var lines []string
	for i := 0; i < n; i++ {
		lines = append(lines, g.line(visibleDevices(i*tp, tp),
			f("-tp %d -dp %d --data-parallel-rank %d --port %d", tp, n, i, 8000+i)))
	}
	g.node("h0", lines...)
}

// genExternalSharedNodes is vLLM#53743's layout: external-LB replicas that share nodes, each
// `vllm serve --data-parallel-rank R` line on its own GPUs of a node, every line naming --nnodes
// and its node's --node-rank. On vLLM main of 2026-08 nnodes_within_dp floors to 0 and the rank
// inferred from --node-rank replaces the explicit one (the profile changes nnodes_within_dp and
// external_lb_rank); one deployment in four passes the ranks in another order than the nodes'.
func genExternalSharedNodes(g *gen) {
	nodes := g.pick(1, 2, 2, 3)
	tp := g.pick(1, 2, 4)
	perNode := g.gpus / tp
	if perNode > 4 {
		perNode = g.pick(2, 4)
	}
	dp := nodes * perNode
	ranks := make([]int, dp)
	for i := range ranks {
		ranks[i] = i
	}
	if g.r.IntN(4) == 0 {
		g.r.Shuffle(dp, func(i, j int) { ranks[i], ranks[j] = ranks[j], ranks[i] })
	}
	externalLB := g.r.IntN(2) == 0
	sizeLocal := g.r.IntN(4) == 0
	for k := 0; k < nodes; k++ {
		var lines []string
		for j := 0; j < perNode; j++ {
			flags := []string{f("-tp %d -dp %d --data-parallel-rank %d", tp, dp, ranks[k*perNode+j])}
			if externalLB {
				flags = append(flags, "--data-parallel-external-lb")
			}
			if sizeLocal {
				flags = append(flags, "--data-parallel-size-local 1")
			}
			flags = append(flags, f("--nnodes %d --node-rank %d --master-addr h0 --master-port 29500 --port %d", nodes, k, 8000+j), g.head())
			lines = append(lines, g.line(visibleDevices(j*tp, tp), flags...))
		}
		g.node(host(k), lines...)
	}
}

// disaggConnectors are the connectors of a disaggregated deployment, by role.
var disaggConnectors = []string{"NixlConnector", "MooncakeStoreConnector"}

// genDisaggregated is prefill/decode disaggregation: a prefill deployment on h0 (kv_producer; TP,
// or DP of its own one time in three) and a decode deployment of one or two nodes (kv_consumer;
// DP, internal LB with a --headless follower or external LB by rank), each with its own DP head,
// joined by one connector.
func genDisaggregated(g *gen) {
	conn := disaggConnectors[g.r.IntN(len(disaggConnectors))]
	role := func(r string) string {
		return f(`'{"kv_connector":"%s","kv_role":"%s"}'`, conn, r)
	}
	g.kv = true
	g.kvConfig = role("kv_producer")
	ptp := g.pick(1, 2, 4)
	prefill := []string{f("-tp %d --port 8100", ptp)}
	if g.r.IntN(3) == 0 {
		prefill = []string{f("-tp %d -dp 2 --port 8100 --data-parallel-address h0 --data-parallel-rpc-port 13345", ptp)}
	}
	g.node("h0", g.line("", prefill...))
	g.kvConfig = role("kv_consumer")
	dtp := g.pick(1, 2)
	nodes := g.pick(1, 2)
	local := g.pick(2, 4)
	dp := nodes * local
	external := nodes > 1 && g.r.IntN(2) == 0
	for i := 0; i < nodes; i++ {
		h := host(i + 1)
		addr := "--data-parallel-address h1 --data-parallel-rpc-port 13346"
		if external {
			var lines []string
			for j := 0; j < local; j++ {
				lines = append(lines, g.line(visibleDevices(j*dtp, dtp),
					f("-tp %d -dp %d --data-parallel-rank %d --port %d", dtp, dp, i*local+j, 8200+j), addr))
			}
			g.node(h, lines...)
			continue
		}
		flags := []string{f("-tp %d -dp %d --data-parallel-size-local %d --port 8200", dtp, dp, local), addr}
		if i > 0 {
			flags = append(flags, "--headless", f("--data-parallel-start-rank %d", i*local))
		}
		g.node(h, g.line("", flags...))
	}
}

func genMultiPort(g *gen) {
	nodes := g.pick(1, 2)
	local := g.pick(2, 4)
	tp := g.gpus / local
	dp := nodes * local
	for i := 0; i < nodes; i++ {
		g.node(host(i), g.line("", f("-tp %d -dp %d --data-parallel-size-local %d --node-rank %d --data-parallel-multi-port-external-lb", tp, dp, local, i), g.head()))
	}
}

// genOfflineSPMD is the environment's DP (ParallelConfig.__post_init__ falls back to VLLM_DP_* when
// the command line has DP 1): one command per DP rank on one host.
func genOfflineSPMD(g *gen) {
	tp := g.pick(1, 2)
	n := g.pick(1, 2)
	var lines []string
	for r := 0; r < n; r++ {
		env := f("VLLM_DP_SIZE=%d VLLM_DP_RANK=%d VLLM_DP_MASTER_IP=127.0.0.1 VLLM_DP_MASTER_PORT=%d", n, r, 23000)
		lines = append(lines, g.line(env, f("-tp %d --port %d", tp, 8000+r)))
	}
	g.node("h0", lines...)
}

// genAPIServer launches with `python -m vllm.entrypoints.openai.api_server`, which runs run_server
// whatever the LB flags say.
func genAPIServer(g *gen) {
	tp := g.pick(1, 2, 4)
	dp := g.pick(1, 2)
	line := g.line("", f("-tp %d -dp %d", tp, dp))
	line = strings.Replace(line, "vllm serve "+g.d.Model.Name, "python3 -m vllm.entrypoints.openai.api_server --model "+g.d.Model.Name, 1)
	g.node("h0", line)
}

// invalid launches, each one vLLM refuses (or the model says it does). None needs more GPUs than
// the node has: the scenario loader refuses such a file, and a written deployment must replay.
var invalidLaunches = []string{
	"-tp 2 -dp 2 --headless --data-parallel-hybrid-lb",
	"-tp 2 -dp 4 --data-parallel-size-local 2 --data-parallel-rank 1",
	"-tp 3 -dp 1 --nnodes 2 --node-rank 0",
	"-tp 4 -dp 1 --nnodes 2 --node-rank 3",
	"-tp 2 -dp 2 --data-parallel-size-local 4",
	"-tp 2 -dp 1 --data-parallel-external-lb",
	"-tp 2 -dp 2 --data-parallel-hybrid-lb --data-parallel-external-lb",
	"-tp 2 -dp 2 --data-parallel-rank 0 --data-parallel-start-rank 0",
	"-tp 2 -dp 2 --data-parallel-hybrid-lb",
	"-tp 2 -dp 2 --data-parallel-backend ray --nnodes 2",
	"-tp 2 -dp 2 --data-parallel-rank 2",
	"-tp 2 -dp 2 --headless --api-server-count 2",
	"-tp 2 -dp 4 --data-parallel-size-local 2 --data-parallel-multi-port-external-lb --api-server-count 2",
	"-tp 2 -dp 4 --data-parallel-size-local 0 --headless",
	"-tp 3 -dp 2 --data-parallel-size-local 2",
	"-tp 4 -dp 2 --nnodes 3 --node-rank 1 --headless",
	"-tp 2 -pp 2 -dcp 4",
	"-tp 2 -dp 2 --data-parallel-external-lb --data-parallel-rank 1 --data-parallel-size-local 1",
	// Dotted keys replace the whole JSON: no connector is named, which VllmConfig refuses.
	"-tp 2 --kv-transfer-config.kv_role kv_both",
}

func genInvalid(g *gen) {
	g.node("h0", g.line("", invalidLaunches[g.r.IntN(len(invalidLaunches))]))
}

// WriteScenarios writes each deployment as a scenario file dir/<name>.yaml that widetp explain
// and widetp conform load, under profile (the command-line form).
func WriteScenarios(dir string, deps []vllm.Deployment, profile string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range deps {
		b, err := ScenarioYAML(d, profile, nil)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, d.Name+".yaml"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ScenarioYAML is deployment d as a scenario file under profile (the command-line form), with
// faults as its `faults:` timeline when there are any (each step as the scenario format writes
// it, README "Faults").
func ScenarioYAML(d vllm.Deployment, profile string, faults []map[string]any) ([]byte, error) {
	doc := map[string]any{
		"name":        d.Name,
		"description": "Generated by widetp conform: replay with widetp explain FILE --planner vllm, or widetp conform FILE.",
		"profile":     profileMap(profile),
		"model":       map[string]any{"name": d.Model.Name, "moe": d.Model.MoE},
	}
	var nodes []map[string]any
	for _, n := range d.Nodes {
		node := map[string]any{"host": n.Host, "gpus": n.GPUs, "commands": n.Commands}
		if len(n.Env) > 0 {
			node["env"] = n.Env
		}
		nodes = append(nodes, node)
	}
	doc["nodes"] = nodes
	if len(faults) > 0 {
		doc["faults"] = faults
	}
	return yaml.Marshal(doc)
}

// profileMap renders the command-line form (base,change=value) as the scenario's profile value.
func profileMap(spec string) any {
	parts := strings.Split(spec, ",")
	if len(parts) == 1 {
		return spec
	}
	m := map[string]string{"base": parts[0]}
	keys := []string{}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		m[k] = v
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return m
}
