package vllm

import (
	"errors"
	"fmt"
	"strings"
)

// Model is the served model as far as identity cares: vLLM branches on is_moe.
type Model struct {
	Name string `json:"name"`
	MoE  bool   `json:"moe"`
}

// Options are the deployment-wide inputs of the model.
type Options struct {
	Model   Model
	Profile Profile
	// Seed makes the uuid4 engine_ids vLLM draws reproducible (see baseEngineID).
	Seed string
	// NIXLProducers are the deployment's NIXL producer engines, which the consumers' workers dial
	// (PlanDeployment fills it; addresses.go).
	NIXLProducers []NIXLProducer
	// Install is the vLLM installation the deployment runs.
	Install Install
}

// Install is what vLLM's launch code reads of its own installation: where its package is (envs.py
// looks for the Rust front end's binary, vllm-rs, beside itself) and whether that binary is
// there. The zero value is a wheel installed into Python 3.12's dist-packages, as vLLM's images
// have it, taken to carry vllm-rs (a release built with the Rust front end); widetp conform
// gives the model the installation it runs (a source tree carries no vllm-rs).
type Install struct {
	// PackageDir is the vllm package's directory ("" for DefaultPackageDir).
	PackageDir string `json:"package_dir,omitempty"`
	// NoRustFrontend: the package carries no executable vllm-rs.
	NoRustFrontend bool `json:"no_rust_frontend,omitempty"`
	// ChatTemplates are the names in the package's transformers_utils/chat_templates directory,
	// where a --chat-template that names no file is looked up (nil for DefaultChatTemplates).
	ChatTemplates []string `json:"chat_templates,omitempty"`
}

// DefaultChatTemplates is what a wheel's transformers_utils/chat_templates directory holds: the
// package's two modules and the templates its registry.py falls back to.
var DefaultChatTemplates = []string{"__init__.py", "registry.py",
	"template_basic.jinja", "template_blip2.jinja", "template_chatml.jinja",
	"template_deepseek_ocr.jinja", "template_deepseek_vl2.jinja", "template_minicpmv45.jinja"}

func (i Install) chatTemplates() []string {
	if i.ChatTemplates == nil {
		return DefaultChatTemplates
	}
	return i.ChatTemplates
}

// DefaultPackageDir is where vLLM's images install the vllm package.
const DefaultPackageDir = "/usr/local/lib/python3.12/dist-packages/vllm"

func (i Install) packageDir() string {
	if i.PackageDir == "" {
		return DefaultPackageDir
	}
	return i.PackageDir
}

// Node is one host of a deployment: its hostname (socket.gethostname() of every process on it),
// GPU count, environment (already layered: scenario, then node) and `vllm serve` lines in launch
// order. A node without commands is allowed (a Ray worker node, for instance) and plans nothing.
type Node struct {
	Host     string
	GPUs     int
	Env      map[string]string
	Commands []string
}

// PlanNode derives every process tree the node's commands start. A command that does not parse,
// or that vLLM would reject while building its config, still yields a top process: one with a
// Crash at StageConfig carrying the Python-style exception. PlanNode returns an error only for
// input that is no vLLM behaviour: an empty or malformed host name, a non-positive GPU count, a
// profile with unknown values, or a launch the model does not simulate
// (--distributed-executor-backend external_launcher, which needs torchrun).
func PlanNode(n Node, o Options) (*NodePlan, error) {
	if err := validateHost(n.Host); err != nil {
		return nil, fmt.Errorf("plan node: %w", err)
	}
	if n.GPUs <= 0 {
		return nil, fmt.Errorf("plan node %s: GPUs must be positive, got %d", n.Host, n.GPUs)
	}
	if err := o.Profile.Validate(); err != nil {
		return nil, fmt.Errorf("plan node %s: %w", n.Host, err)
	}
	np := &NodePlan{Host: n.Host, Commands: make([]*ProcessPlan, 0, len(n.Commands))}
	for i, line := range n.Commands {
		cp := &cmdPlanner{node: n, opts: o, cmd: i}
		top, err := cp.plan(line)
		if err != nil {
			return nil, fmt.Errorf("plan node %s command %d: %w", n.Host, i, err)
		}
		np.Commands = append(np.Commands, top)
	}
	return np, nil
}

// errNotSimulated marks a valid vLLM launch the model does not simulate.
var errNotSimulated = errors.New("launch not simulated")

// validateHost accepts what a process can see as its hostname and what IDs and ipc paths can
// carry: a non-empty DNS-like name without '/', ':' or blanks.
func validateHost(h string) error {
	if h == "" {
		return errors.New("host name is empty")
	}
	if strings.ContainsAny(h, "/: \t\n") {
		return fmt.Errorf("host name %q contains '/', ':' or a blank", h)
	}
	return nil
}
