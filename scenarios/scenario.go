// Package scenarios loads scenario files: the `vllm serve` lines of every node of one deployment,
// the vLLM behaviour (profile) to model it under, and the violations it is expected to show
// (README, "Scenario files"). Loading validates everything that can be known before anything
// starts — each command parses, names the scenario's model and fits on its node's GPUs — and every
// error names the file, line and field.
package scenarios

import (
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// Scenario is one loaded scenario file.
type Scenario struct {
	// File is the path the scenario was loaded from, as given (errors quote it).
	File        string
	Name        string
	Description string
	// Bugs are the public bugs the scenario reproduces, as written (`vllm#48061`, in file order);
	// empty when the file names none. The e2e suite labels the scenario's spec BugLabel(ref) for
	// each one.
	Bugs []string
	// Profile is the profile as written (or as WithProfile overrode it): a name, or a base with
	// changes. Resolved is what it resolves to in the model.
	Profile  ProfileSpec
	Resolved vllm.Profile
	// Model is the served model; MoE decides how vLLM treats data parallelism (a dense model's DP
	// ranks are independent, a MoE model's DP group spans every replica).
	Model vllm.Model
	// GPUsPerNode is the default GPU count of a node (8 when the file says nothing).
	GPUsPerNode int
	// Env is set on every node; a node's own Env is layered over it.
	Env   map[string]string
	Nodes []Node
	Store Store
	// Expect is the exact set of violation kinds the scenario must show, sorted and distinct (the
	// form report.KindSet returns); empty means it must be healthy.
	Expect []report.Kind
	// Faults is the timeline of fault steps, in file order; empty when the file has none.
	Faults []Step

	// nameLine is where the name is written, for errors about it across files.
	nameLine int
	// profileLine and modelLine are where those fields are, for the checks that need vLLM.
	profileLine, modelLine int
}

// Node is one host of the deployment.
type Node struct {
	// Host is the node's hostname (a DNS label): vLLM puts it in the Mooncake lookup path.
	Host string
	// GPUs on this node (the scenario's gpus_per_node unless the node says).
	GPUs int
	// Env is the node's own environment as written; Environ layers it over the scenario's.
	Env map[string]string
	// Commands are the `vllm serve` lines run on this host, verbatim, in order; several are
	// co-located launches.
	Commands []string
	// Args are the Commands as vLLM's argument parser reads them, one for one.
	Args []*vllm.ServeArgs
	// Line is where the node starts in the file; CommandLines are where its commands are.
	Line         int
	CommandLines []int
	// viaCommand is true when the file used the `command:` shorthand (errors name that field).
	viaCommand bool
}

// Store configures the fake Mooncake store.
type Store struct {
	// Flavor is the metadata server whose quirks the fake reproduces: cpp, python or go
	// (Mooncake's mooncake-store/src/http_metadata_server.cpp,
	// mooncake-wheel/mooncake/http_metadata_server.py and
	// mooncake-transfer-engine/example/http-metadata-server/main.go; package fakestore).
	Flavor string
}

// Store flavors, after the three real metadata servers.
const (
	FlavorCpp    = "cpp"
	FlavorPython = "python"
	FlavorGo     = "go"
)

// DefaultGPUsPerNode is the GPU count of a node when the file gives none: the common 8-GPU server
// the wide-TP deployments of vLLM#48061 ran on.
const DefaultGPUsPerNode = 8

// Environ returns the environment of node n: the scenario's env with the node's layered over it.
func (s *Scenario) Environ(n Node) map[string]string {
	out := make(map[string]string, len(s.Env)+len(n.Env))
	for k, v := range s.Env {
		out[k] = v
	}
	for k, v := range n.Env {
		out[k] = v
	}
	return out
}
