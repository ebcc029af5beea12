//go:build linux

package local

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
)

// LocalInspect is what Inspect says about a local host. Where a field means what Docker's inspect
// field means it has Docker's name and place (Config.Hostname, State.Status,
// NetworkSettings.IPAddress), so artifacts read alike on both runtimes; the rest are facts only a
// local run has: the program's pid, process group and session, and every process of the session.
type LocalInspect struct {
	ID              string `json:"Id"` // <run id>/<host>
	Name            string
	Runtime         string
	Config          LocalInspectConfig
	State           LocalInspectState
	NetworkSettings LocalInspectNetwork
	Pid             int
	Pgid            int
	Sid             int
	// Binary is the program's file in the cache; BinaryHash its content hash.
	Binary     string
	BinaryHash string
	IPCRoot    string
	LogPath    string
	// Processes are the live and zombie processes of the host's session, the program first.
	Processes []LocalProcess
}

// LocalInspectConfig is how the program was started.
type LocalInspectConfig struct {
	Hostname   string
	Cmd        []string // argv, $(VAR) expanded, the binary's path first
	Env        []string
	WorkingDir string
}

// LocalInspectState is State, with the program's pid and times.
type LocalInspectState struct {
	Status     string
	Running    bool
	Paused     bool
	ExitCode   int
	OOMKilled  bool
	Pid        int
	StartedAt  string
	FinishedAt string `json:",omitempty"`
}

// LocalInspectNetwork is the host's address and its view of every other host's.
type LocalInspectNetwork struct {
	IPAddress string
	// Hosts is its WIDETP_HOSTS, as a map.
	Hosts map[string]string
}

// LocalProcess is one process of a host, from /proc.
type LocalProcess struct {
	Pid   int
	PPid  int
	Pgid  int
	State string // proc(5)'s letter
	Comm  string
}

// Inspect implements Runtime.
func (l *Local) Inspect(ctx context.Context, host string) ([]byte, error) {
	h, err := l.host(host)
	if err != nil {
		return nil, fmt.Errorf("inspect %w", err)
	}
	st := h.state()
	h.mu.Lock()
	in, bin := h.inst, h.bin
	h.mu.Unlock()
	var binHash string
	if d, err := runtimes.DigestFile(bin.Path); err == nil {
		binHash = d.Sum
	}
	ins := LocalInspect{
		ID: l.cfg.RunID + "/" + h.name, Name: h.name, Runtime: l.Name(),
		Config: LocalInspectConfig{Hostname: h.name, Cmd: in.argv, Env: in.env, WorkingDir: h.root},
		State: LocalInspectState{Status: st.Status, Running: st.Running, Paused: st.Paused, ExitCode: st.ExitCode, OOMKilled: st.OOMKilled,
			StartedAt: in.started.UTC().Format(time.RFC3339Nano)},
		NetworkSettings: LocalInspectNetwork{IPAddress: h.addr.String(), Hosts: map[string]string{}},
		Binary:          bin.Path, BinaryHash: binHash, IPCRoot: h.root, LogPath: h.logPath,
		Processes: []LocalProcess{},
	}
	if in.exited() {
		ins.State.FinishedAt = in.finished.UTC().Format(time.RFC3339Nano)
	} else {
		ins.Pid, ins.Pgid, ins.Sid, ins.State.Pid = in.pid, in.pid, in.pid, in.pid
		procs, err := sessionProcs(in.pid)
		if err != nil {
			return nil, fmt.Errorf("inspect host %s: %w", host, err)
		}
		for _, p := range procs {
			lp := LocalProcess{Pid: p.PID, PPid: p.PPID, Pgid: p.PGID, State: string(p.State), Comm: p.Comm}
			if p.PID == in.pid {
				ins.Processes = append([]LocalProcess{lp}, ins.Processes...)
			} else {
				ins.Processes = append(ins.Processes, lp)
			}
		}
	}
	for _, kv := range in.env {
		if v, ok := strings.CutPrefix(kv, EnvHosts+"="); ok {
			for _, pair := range strings.Split(v, ",") {
				if name, addr, ok := strings.Cut(pair, "="); ok {
					ins.NetworkSettings.Hosts[name] = addr
				}
			}
		}
	}
	b, err := json.MarshalIndent(ins, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("inspect host %s: %w", host, err)
	}
	return b, nil
}
