package scenarios

import (
	"fmt"
	"sort"
	"strings"
)

// ProfileSpec is a profile as a scenario or the command line writes it: a named profile (Base
// alone), or a base with behaviour changes applied over it (`{base: main, mooncake_dp_index:
// legacy}`, or `main,mooncake_dp_index=legacy` on the command line).
type ProfileSpec struct {
	Base    string
	Changes map[string]string
}

// String renders the spec in the command-line form, changes in name order, so that it reads back
// with ParseProfileSpec.
func (p ProfileSpec) String() string {
	if len(p.Changes) == 0 {
		return p.Base
	}
	keys := make([]string, 0, len(p.Changes))
	for k := range p.Changes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{p.Base}
	for _, k := range keys {
		parts = append(parts, k+"="+p.Changes[k])
	}
	return strings.Join(parts, ",")
}

// ParseProfileSpec reads the command-line form: a profile name, or base,change=value,...
func ParseProfileSpec(s string) (ProfileSpec, error) {
	parts := strings.Split(s, ",")
	base := strings.TrimSpace(parts[0])
	if base == "" || strings.Contains(base, "=") {
		return ProfileSpec{}, fmt.Errorf("profile %q: want a profile name, or base,change=value,... (like main,mooncake_dp_index=legacy)", s)
	}
	spec := ProfileSpec{Base: base}
	for _, part := range parts[1:] {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return ProfileSpec{}, fmt.Errorf("profile %q: %q is not change=value", s, part)
		}
		if spec.Changes == nil {
			spec.Changes = map[string]string{}
		}
		if _, dup := spec.Changes[k]; dup {
			return ProfileSpec{}, fmt.Errorf("profile %q: change %q is given twice", s, k)
		}
		spec.Changes[k] = v
	}
	return spec, nil
}
