package scenarios

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// A bug reference names the public bug a scenario reproduces, as `<repo>#<number>`: `vllm#48061`.
// The e2e suite labels the scenario's spec `bug:<reference>`, so a reference must also be a valid
// Ginkgo label value: Ginkgo refuses '/' (and &|!,()) in labels, which is why the repository is a
// short name from bugRepos rather than GitHub's owner/name.
var bugRefRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-z0-9][a-z0-9-]*)#([1-9][0-9]*)$`) })

// bugRepos are the repositories a bug reference may name: the projects whose behaviour widetp
// models. A short name outside this list is almost always a typo (`vlm#48061`), and a label
// nobody filters on would silently drop the scenario from `--label-filter=bug:...` runs.
var bugRepos = map[string]string{
	"vllm":     "vllm-project/vllm",
	"mooncake": "kvcache-ai/Mooncake",
}

// BugURL returns the GitHub address of a valid bug reference (issues and pull requests share
// their numbers, and GitHub redirects /issues/N to /pull/N), or "" when ref is not one.
func BugURL(ref string) string {
	m := bugRefRE().FindStringSubmatch(ref)
	if m == nil {
		return ""
	}
	repo, ok := bugRepos[m[1]]
	if !ok {
		return ""
	}
	return "https://github.com/" + repo + "/issues/" + m[2]
}

// BugLabel is the Ginkgo label the e2e suite gives a scenario that reproduces ref.
func BugLabel(ref string) string { return "bug:" + ref }

// bugs reads the optional `bugs:` list: each entry a valid reference, each once.
func (p *parser) bugs(s *Scenario, v *yaml.Node) {
	items := p.list(v, "bugs", "a list of bug references like [vllm#48061]", "name the bugs the scenario reproduces, or leave bugs out")
	seen := map[string]int{}
	for i, bv := range items {
		path := fmt.Sprintf("bugs[%d]", i)
		ref, ok := p.str(bv, path)
		if !ok {
			continue
		}
		m := bugRefRE().FindStringSubmatch(ref)
		if m == nil {
			p.errorf(bv, path, "%q is not a bug reference: want <repo>#<number>, like vllm#48061", ref)
			continue
		}
		if _, known := bugRepos[m[1]]; !known {
			p.errorf(bv, path, "%q: unknown repository %q (known: %s)", ref, m[1], knownBugRepos())
			continue
		}
		if _, err := strconv.Atoi(m[2]); err != nil {
			p.errorf(bv, path, "%q: the number %s is too large", ref, m[2])
			continue
		}
		if prev, dup := seen[ref]; dup {
			p.errorf(bv, path, "%q is already listed at bugs[%d]", ref, prev)
			continue
		}
		seen[ref] = i
		s.Bugs = append(s.Bugs, ref)
	}
}

func knownBugRepos() string {
	names := make([]string, 0, len(bugRepos))
	for n, full := range bugRepos {
		names = append(names, n+" ("+full+")")
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
