package scenarios

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Option changes how a scenario is loaded.
type Option func(*options)

type options struct {
	profile *ProfileSpec
}

// WithProfile models the scenario under spec instead of the file's profile (`--profile`). An
// unknown profile, change or value is then an error about the override, not the file.
func WithProfile(spec ProfileSpec) Option {
	return func(o *options) { o.profile = &spec }
}

// Load reads and validates the scenario file at path. Every problem it finds is reported, each as
// an *Error naming the file, line and field (errors.Join when there are several).
func Load(path string, opts ...Option) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("read scenario: %v", unwrapPath(err))}
	}
	return Parse(path, data, opts...)
}

// Parse validates the scenario in data as if it had been read from file (which errors quote).
func Parse(file string, data []byte, opts ...Option) (*Scenario, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s, err := parse(file, data)
	if err != nil {
		return nil, err
	}
	if err := validate(s, o); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadAll loads every *.yaml file of dir, in name order, and checks that scenario names are
// unique across them (a name seeds a run's ids and names its artifacts). A directory without
// scenarios is an error: a suite over it would pass having checked nothing. On error, the
// scenarios that did load are returned with it.
func LoadAll(dir string) ([]*Scenario, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("list scenarios in %s: %w", dir, unwrapPath(err))
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list scenarios in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("list scenarios in %s: no *.yaml files", dir)
	}
	sort.Strings(files)
	var (
		out    []*Scenario
		errs   []error
		byName = map[string]string{}
	)
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := byName[s.Name]; dup {
			errs = append(errs, &Error{File: f, Line: s.nameLine, Field: "name", Msg: fmt.Sprintf("%q is already the name of %s", s.Name, prev)})
			continue
		}
		byName[s.Name] = f
		out = append(out, s)
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	return out, nil
}

// unwrapPath drops the *PathError wrapper whose path the message already names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
