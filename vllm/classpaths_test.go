package vllm

import (
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// A --chat-template without Jinja's characters is a path, checked before anything else of the
// launch (vllm/entrypoints/chat_utils.py validate_chat_template, called first by
// vllm/entrypoints/openai/cli_args.py validate_parsed_serve_args; the built-in directory is
// vllm/transformers_utils/chat_templates, registry.py CHAT_TEMPLATES_DIR).
func TestChatTemplatePathMustExist(t *testing.T) {
	snapshot := Install{PackageDir: "/src/vllm", ChatTemplates: []string{"__init__.py", "registry.py"}}
	tests := []struct {
		name, line string
		inst       Install
		want       string // "" for a launch that passes the check
	}{
		{"a file the host does not have", "vllm serve m --chat-template ./tool_chat.jinja", Install{},
			"ValueError: The supplied chat template string (./tool_chat.jinja) appears path-like, but doesn't exist! Tried: ./tool_chat.jinja and " +
				DefaultPackageDir + "/transformers_utils/chat_templates/tool_chat.jinja"},
		{"an absolute path replaces the built-in directory", "vllm serve m --chat-template //t//x.jinja", Install{},
			"ValueError: The supplied chat template string (//t//x.jinja) appears path-like, but doesn't exist! Tried: //t//x.jinja and //t/x.jinja"},
		{"a built-in template of a wheel", "vllm serve m --chat-template template_chatml.jinja", Install{}, ""},
		{"the same name where the package lacks it", "vllm serve m --chat-template template_chatml.jinja", snapshot,
			"Tried: template_chatml.jinja and /src/vllm/transformers_utils/chat_templates/template_chatml.jinja"},
		{"a module of the built-in directory", "vllm serve m --chat-template registry.py", snapshot, ""},
		{"a literal template", `vllm serve m --chat-template "{% for m in messages %}{{ m.content }}{% endfor %}"`, Install{}, ""},
		{"the working directory exists", "vllm serve m --chat-template ./", Install{}, ""},
		{"None is no template", "vllm serve m --chat-template None", Install{}, ""},
		{"the module entrypoint checks it too", "python -m vllm.entrypoints.openai.api_server --model m --chat-template x", Install{},
			"ValueError: The supplied chat template string (x) appears path-like"},
		{"before the auto tool choice check", "vllm serve m --enable-auto-tool-choice --chat-template x", Install{}, "appears path-like"},
		{"vllm serve --grpc checks it too", "vllm serve m --grpc --chat-template x", Install{}, "appears path-like"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			procs, err := Predict(Deployment{Name: t.Name(), Model: Model{Name: "m"}, Profile: profileOf(t, "main"),
				Seed: "seed", Install: tt.inst, Nodes: []Node{node("h", tt.line)}})
			if err != nil {
				t.Fatalf("Predict: %v", err)
			}
			top := procs[0]
			switch {
			case tt.want == "" && top.Crashed():
				t.Errorf("%s: %s, want a launch", top.ID, exitText(top))
			case tt.want != "" && (!top.Crashed() || !strings.Contains(top.Exit.Error, tt.want)):
				t.Errorf("%s: %s, want a crash with %q", top.ID, exitText(top), tt.want)
			case tt.want != "" && len(procs) != 1:
				t.Errorf("%d processes, want the front end alone", len(procs))
			}
		})
	}
}

// Class import paths: Executor.get_class (vllm/v1/executor/abstract.py), called by every launch
// path right after create_engine_config, and WorkerWrapperBase.init_worker
// (vllm/v1/worker/worker_base.py) in each worker; both split the name with
// vllm/utils/import_utils.py resolve_obj_by_qualname.
func TestClassImportPaths(t *testing.T) {
	const unpack = "ValueError: not enough values to unpack (expected 2, got 1)"
	tests := []struct {
		name  string
		nodes []Node
		check func(t *testing.T, procs []report.Process)
	}{
		{"an executor backend that is no import path fails the front end", []Node{node("h", "vllm serve org/M -tp 2 --distributed-executor-backend auto")},
			func(t *testing.T, procs []report.Process) {
				crashedWith("h/0/api-server-0", unpack)(t, procs)
				if len(procs) != 1 {
					t.Errorf("%d processes, want the front end alone", len(procs))
				}
			}},
		{"several API servers: after the config and before the rank assert", []Node{node("h", "vllm serve org/M -dp 2 --api-server-count 2 --distributed-executor-backend x")},
			crashedWith("h/0/api-server-0", unpack)},
		{"a headless node that starts engine cores fails", []Node{node("h", "vllm serve org/M -dp 2 --headless -dpa h0 --distributed-executor-backend x")},
			crashedWith("h/0/headless-0", unpack)},
		{"a dotted executor path is taken to import", []Node{node("h", "vllm serve org/M -tp 2 --distributed-executor-backend mypkg.MyExecutor")},
			func(t *testing.T, procs []report.Process) {
				if p := get(t, procs, "h/0/engine-core-0/worker-1"); p.Crashed() {
					t.Errorf("%s", exitText(p))
				}
			}},
		{"a worker class that is no import path fails every worker before its Worker sets its rank", []Node{node("h", "vllm serve org/M -tp 2 --worker-cls MyWorker")},
			func(t *testing.T, procs []report.Process) {
				for _, id := range []string{"h/0/engine-core-0/worker-0", "h/0/engine-core-0/worker-1"} {
					crashedWith(id, unpack)(t, procs)
					if w := get(t, procs, id); w.Rank == nil || *w.Rank != 0 || w.Replica != "" {
						t.Errorf("%s: rank %v replica %q, want rank 0 and no torch world", id, w.Rank, w.Replica)
					}
				}
				// The front end resolves no worker class: it fails on its engine's death.
				crashedWith("h/0/api-server-0", "Engine core initialization failed")(t, procs)
			}},
		{"a worker extension that is no import path fails the workers too", []Node{node("h", "vllm serve org/M --worker-extension-cls auto")},
			crashedWith("h/0/engine-core-0/worker-0", unpack)},
		{"auto is the platform's worker, and an empty extension is none", []Node{node("h", "vllm serve org/M -tp 2 --worker-cls auto --worker-extension-cls ''")},
			func(t *testing.T, procs []report.Process) {
				for _, p := range procs {
					if p.Crashed() {
						t.Errorf("%s: %s", p.ID, exitText(p))
					}
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, predict(t, true, "main", tt.nodes...))
		})
	}
}
