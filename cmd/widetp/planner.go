package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/probe"
)

const plannerHelp = `--planner picks who turns the vllm serve lines into process plans: model (the Go model, the
default, no Python) or vllm[:PATH] (vLLM's own launch code run by widetp's Python probe; PATH is a
vLLM source tree or site-packages directory, else $WIDETP_VLLM, else the vllm python3 imports).
Without python3 or an importable vLLM, --planner vllm exits 2 saying what is missing.`

// openPlanner returns the planner a --planner value names and a function that releases it.
func openPlanner(ctx context.Context, spec string) (vllm.Planner, func(), error) {
	name, path, _ := strings.Cut(spec, ":")
	switch name {
	case "", "model":
		if path != "" {
			return nil, nil, fmt.Errorf("--planner model takes no path (got %q)", spec)
		}
		return vllm.ModelPlanner{}, func() {}, nil
	case "vllm":
		return openProbe(ctx, path)
	}
	return nil, nil, fmt.Errorf("--planner %q: want model, vllm or vllm:PATH", spec)
}

// openProbe starts the vllm planner on the vLLM at path, $WIDETP_VLLM, or the one python3
// imports.
func openProbe(ctx context.Context, path string) (*probe.Planner, func(), error) {
	if path == "" {
		path = os.Getenv(probe.EnvVLLM)
	}
	var opts []probe.Option
	if path != "" {
		opts = append(opts, probe.WithVLLM(path))
	}
	p, err := probe.New(ctx, opts...)
	if err != nil {
		return nil, nil, err
	}
	return p, func() { _ = p.Close() }, nil
}

// plannerExit is the exit code for a planner that could not start: bad input (2) when python3 or
// vLLM is missing, as the README says.
func plannerExit(err error) int {
	if errors.Is(err, probe.ErrUnavailable) {
		return exitBadInput
	}
	return exitBadInput
}
