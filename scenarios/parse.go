package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/widetp/widetp/internal/nodeapi"
	"github.com/widetp/widetp/report"
)

// maxFileSize bounds what Parse reads: a 64-node scenario is a few tens of kilobytes, and a bound
// keeps a wrong path (a log, a binary) from being walked at all.
const maxFileSize = 1 << 20

var (
	nameRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9-]+$`) })
	envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	// yaml.v3's syntax errors carry their line in the text only.
	yamlLineRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })
)

// parser walks one file's YAML tree and collects every problem, so that one run of the loader
// shows all of a file's mistakes.
type parser struct {
	file string
	errs []*Error
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errorAt(line, field, format, args...)
}

func (p *parser) errorAt(line int, field, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// parse reads the YAML of one scenario file into s without the checks that need the vLLM model
// (those are in validate.go).
func parse(file string, data []byte) (*Scenario, error) {
	p := &parser{file: file}
	if len(data) > maxFileSize {
		p.errorf(nil, "", "file is %d bytes, larger than the %d a scenario can be", len(data), maxFileSize)
		return nil, p.err()
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(nil, "", "file is empty: a scenario needs at least name, description, profile, model and nodes")
		} else {
			p.yamlError(err)
		}
		return nil, p.err()
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		p.errorf(&doc, "", "file holds no scenario")
		return nil, p.err()
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(&extra, "", "a second YAML document: a scenario file holds one")
		return nil, p.err()
	} else if !errors.Is(err, io.EOF) {
		p.yamlError(err)
		return nil, p.err()
	}
	s := &Scenario{File: file, GPUsPerNode: DefaultGPUsPerNode, Store: Store{Flavor: FlavorCpp}}
	p.scenario(s, doc.Content[0])
	if err := p.err(); err != nil {
		return nil, err
	}
	return s, nil
}

func (p *parser) yamlError(err error) {
	msg := err.Error()
	if m := yamlLineRE().FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: "invalid YAML: " + m[2]})
		return
	}
	p.errs = append(p.errs, &Error{File: p.file, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")})
}

// field is one key of a mapping with the node of its value.
type field struct {
	key   *yaml.Node
	value *yaml.Node
}

// fields are a mapping's keys in document order with the value of each.
type fields struct {
	order []string
	byKey map[string]field
}

func (f fields) get(key string) (field, bool) {
	v, ok := f.byKey[key]
	return v, ok
}

// mapping returns the keys of a mapping node, reporting duplicate and unknown keys (an unknown key
// is almost always a typo of a known one, and silently ignoring `gpu_per_node` would give a node
// 8 GPUs nobody asked for). It returns nil when n is no mapping.
func (p *parser) mapping(n *yaml.Node, path string, known ...string) *fields {
	if !p.usable(n, path) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "want a mapping, got %s", describe(n))
		return nil
	}
	out := &fields{byKey: map[string]field{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !p.usable(k, path) {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, path, "keys must be plain names, got %s", describe(k))
			continue
		}
		if prev, dup := out.byKey[k.Value]; dup {
			p.errorf(k, join(path, k.Value), "given twice (first on line %d)", prev.key.Line)
			continue
		}
		out.byKey[k.Value] = field{k, v}
		out.order = append(out.order, k.Value)
		if known != nil && !contains(known, k.Value) {
			p.errorf(k, join(path, k.Value), "unknown field (known: %s)", strings.Join(known, ", "))
		}
	}
	return out
}

// usable rejects the YAML features a scenario does not use and that would make a file's meaning
// depend on another part of it: aliases and merge keys.
func (p *parser) usable(n *yaml.Node, path string) bool {
	if n.Kind == yaml.AliasNode {
		p.errorf(n, path, "YAML aliases (*%s) are not supported; use the scenario env for what nodes share", n.Value)
		return false
	}
	if n.Tag == "!!merge" {
		p.errorf(n, path, "YAML merge keys (<<) are not supported")
		return false
	}
	return true
}

// list returns the items of the non-empty YAML list at path, or nil once it has reported why there
// are none: an alias or merge key, a value that is not a list (want says what was expected), or an
// empty list (empty says why one item at least is needed).
func (p *parser) list(v *yaml.Node, path, want, empty string) []*yaml.Node {
	if !p.usable(v, path) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		p.errorf(v, path, "want %s, got %s", want, describe(v))
		return nil
	}
	if len(v.Content) == 0 {
		p.errorf(v, path, "is empty: %s", empty)
		return nil
	}
	return v.Content
}

func (p *parser) scenario(s *Scenario, root *yaml.Node) {
	top := p.mapping(root, "", "name", "description", "bugs", "profile", "model", "gpus_per_node", "env", "nodes", "store", "expect", "faults")
	if top == nil {
		return
	}
	required := func(name string) (*yaml.Node, bool) {
		f, ok := top.get(name)
		if !ok {
			p.errorf(root, name, "required")
		}
		return f.value, ok
	}
	if v, ok := required("name"); ok {
		s.nameLine = v.Line
		if s.Name, ok = p.str(v, "name"); ok && !nameRE().MatchString(s.Name) {
			p.errorf(v, "name", "%q must match [a-z0-9-]+", s.Name)
		}
	}
	if v, ok := required("description"); ok {
		if s.Description, ok = p.str(v, "description"); ok && strings.TrimSpace(s.Description) == "" {
			p.errorf(v, "description", "is empty: say what the deployment is and what it shows")
		}
	}
	if f, ok := top.get("bugs"); ok {
		p.bugs(s, f.value)
	}
	if v, ok := required("profile"); ok {
		s.profileLine = v.Line
		p.profile(s, v)
	}
	if v, ok := required("model"); ok {
		s.modelLine = v.Line
		p.model(s, v)
	}
	if f, ok := top.get("gpus_per_node"); ok {
		if n, ok := p.positive(f.value, "gpus_per_node"); ok {
			s.GPUsPerNode = n
		}
	}
	if f, ok := top.get("env"); ok {
		s.Env = p.env(f.value, "env")
	}
	if v, ok := required("nodes"); ok {
		p.nodes(s, v)
	}
	if f, ok := top.get("store"); ok {
		p.store(s, f.value)
	}
	if f, ok := top.get("expect"); ok {
		p.expect(s, f.value)
	}
	if f, ok := top.get("faults"); ok {
		p.faults(s, f.value)
	}
}

func (p *parser) profile(s *Scenario, v *yaml.Node) {
	if v.Kind == yaml.ScalarNode {
		if name, ok := p.str(v, "profile"); ok {
			s.Profile = ProfileSpec{Base: name}
		}
		return
	}
	m := p.mapping(v, "profile")
	if m == nil {
		return
	}
	b, ok := m.get("base")
	if !ok {
		p.errorf(v, "profile.base", "required when profile is a map (the named profile the changes apply to)")
		return
	}
	base, ok := p.str(b.value, "profile.base")
	if !ok {
		return
	}
	s.Profile = ProfileSpec{Base: base, Changes: map[string]string{}}
	for _, k := range m.order {
		f := m.byKey[k]
		if k == "base" {
			continue
		}
		if val, ok := p.str(f.value, "profile."+k); ok {
			s.Profile.Changes[k] = val
		}
	}
}

func (p *parser) model(s *Scenario, v *yaml.Node) {
	m := p.mapping(v, "model", "name", "moe")
	if m == nil {
		return
	}
	f, ok := m.get("name")
	if !ok {
		p.errorf(v, "model.name", "required (the model argument of the vllm serve lines)")
		return
	}
	if s.Model.Name, ok = p.str(f.value, "model.name"); !ok {
		return
	}
	catMoE, known := KnownModel(s.Model.Name)
	mf, given := m.get("moe")
	switch {
	case given:
		moe, ok := p.boolean(mf.value, "model.moe")
		if !ok {
			return
		}
		if known && moe != catMoE {
			p.errorf(mf.value, "model.moe", "%s is %s, not %s", s.Model.Name, moeWord(catMoE), moeWord(moe))
			return
		}
		s.Model.MoE = moe
	case known:
		s.Model.MoE = catMoE
	default:
		p.errorf(v, "model.moe", "required: %s is not in the built-in catalog, so say whether it is a mixture-of-experts model (vLLM treats data parallelism differently for MoE)", s.Model.Name)
	}
}

func moeWord(moe bool) string {
	if moe {
		return "a MoE model"
	}
	return "a dense model"
}

func (p *parser) nodes(s *Scenario, v *yaml.Node) {
	items := p.list(v, "nodes", "a list of nodes", "a deployment has at least one node")
	hosts := map[string]int{}
	for i, nv := range items {
		path := fmt.Sprintf("nodes[%d]", i)
		m := p.mapping(nv, path, "host", "gpus", "env", "commands", "command")
		if m == nil {
			continue
		}
		n := Node{GPUs: s.GPUsPerNode, Line: nv.Line}
		if f, ok := m.get("host"); !ok {
			p.errorf(nv, path+".host", "required (the node's hostname)")
		} else if h, ok := p.str(f.value, path+".host"); ok {
			n.Host = h
			if !nodeapi.ValidHost(h) {
				p.errorf(f.value, path+".host", "%q is not a DNS label (lowercase letters, digits and '-', at most 63)", h)
			} else if h == nodeapi.StoreHost {
				p.errorf(f.value, path+".host", "%q is the fake store's host in every run; rename the node", h)
			} else if prev, dup := hosts[h]; dup {
				p.errorf(f.value, path+".host", "%q is already the host of nodes[%d]; put co-located launches in one node's commands", h, prev)
			} else {
				hosts[h] = i
			}
		}
		if f, ok := m.get("gpus"); ok {
			if g, ok := p.positive(f.value, path+".gpus"); ok {
				n.GPUs = g
			}
		}
		if f, ok := m.get("env"); ok {
			n.Env = p.env(f.value, path+".env")
		}
		p.commands(&n, nv, m, path)
		s.Nodes = append(s.Nodes, n)
	}
}

func (p *parser) commands(n *Node, nv *yaml.Node, m *fields, path string) {
	one, hasOne := m.get("command")
	many, hasMany := m.get("commands")
	switch {
	case hasOne && hasMany:
		p.errorf(one.key, path+".command", "give either command or commands, not both")
	case hasOne:
		if c, ok := p.str(one.value, path+".command"); ok {
			n.Commands, n.CommandLines, n.viaCommand = []string{c}, []int{one.value.Line}, true
		}
	case hasMany:
		for j, cv := range p.list(many.value, path+".commands", "a list of vllm serve lines", "give at least one vllm serve line") {
			if c, ok := p.str(cv, fmt.Sprintf("%s.commands[%d]", path, j)); ok {
				n.Commands = append(n.Commands, c)
				n.CommandLines = append(n.CommandLines, cv.Line)
			}
		}
	default:
		p.errorf(nv, path+".commands", "required: the node's vllm serve line(s), as commands: [...] or command: \"...\"")
	}
}

func (p *parser) store(s *Scenario, v *yaml.Node) {
	m := p.mapping(v, "store", "flavor")
	if m == nil {
		return
	}
	if f, ok := m.get("flavor"); ok {
		if fl, ok := p.str(f.value, "store.flavor"); ok {
			switch fl {
			case FlavorCpp, FlavorPython, FlavorGo:
				s.Store.Flavor = fl
			default:
				p.errorf(f.value, "store.flavor", "%q is not a metadata server flavor (cpp, python or go)", fl)
			}
		}
	}
}

func (p *parser) expect(s *Scenario, v *yaml.Node) {
	m := p.mapping(v, "expect", "violations")
	if m == nil {
		return
	}
	f, ok := m.get("violations")
	if !ok {
		return
	}
	vs := f.value
	if !p.usable(vs, "expect.violations") {
		return
	}
	if vs.Kind == yaml.ScalarNode && vs.ShortTag() == "!!null" {
		return
	}
	if vs.Kind != yaml.SequenceNode {
		p.errorf(vs, "expect.violations", "want a list of violation kinds, got %s", describe(vs))
		return
	}
	seen := map[report.Kind]int{}
	for i, kv := range vs.Content {
		path := fmt.Sprintf("expect.violations[%d]", i)
		k, ok := p.str(kv, path)
		if !ok {
			continue
		}
		kind := report.Kind(k)
		if !kind.Known() {
			p.errorf(kv, path, "%q is not a violation kind (known: %s)", k, kindList())
			continue
		}
		if prev, dup := seen[kind]; dup {
			p.errorf(kv, path, "%q is already listed at expect.violations[%d]", k, prev)
			continue
		}
		seen[kind] = i
		s.Expect = append(s.Expect, kind)
	}
	sort.Slice(s.Expect, func(i, j int) bool { return s.Expect[i] < s.Expect[j] })
}

func kindList() string {
	parts := make([]string, len(report.Kinds))
	for i, k := range report.Kinds {
		parts[i] = string(k)
	}
	return strings.Join(parts, ", ")
}

func (p *parser) env(v *yaml.Node, path string) map[string]string {
	m := p.mapping(v, path)
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m.order))
	for _, k := range m.order {
		f := m.byKey[k]
		if !envNameRE().MatchString(k) {
			p.errorf(f.key, join(path, k), "%q is not an environment variable name", k)
			continue
		}
		if val, ok := p.str(f.value, join(path, k)); ok {
			out[k] = val
		}
	}
	return out
}

// str reads a scalar as the text it was written as (so `VLLM_DP_SIZE: 2` is "2"); a null or a
// collection is an error.
func (p *parser) str(v *yaml.Node, path string) (string, bool) {
	if !p.usable(v, path) {
		return "", false
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		p.errorf(v, path, "want a string, got %s", describe(v))
		return "", false
	}
	return v.Value, true
}

func (p *parser) positive(v *yaml.Node, path string) (int, bool) {
	var n int
	if !p.usable(v, path) {
		return 0, false
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || v.Decode(&n) != nil {
		p.errorf(v, path, "want a whole number, got %s", describe(v))
		return 0, false
	}
	if n < 1 {
		p.errorf(v, path, "%d: want at least 1", n)
		return 0, false
	}
	return n, true
}

func (p *parser) boolean(v *yaml.Node, path string) (bool, bool) {
	var b bool
	if !p.usable(v, path) {
		return false, false
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&b) != nil {
		p.errorf(v, path, "want true or false, got %s", describe(v))
		return false, false
	}
	return b, true
}

// describe names what a node is, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing (null)"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an empty document"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
