package simnode

import (
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// ProcessCommand is the internal subcommand a simulated process runs as: the node re-executes its
// own binary with it and hands the process its spec on stdin.
const ProcessCommand = "process"

// procSpec is what a parent tells a simulated process: its plan (with its children's plans) and
// everything about the node it needs to execute it.
type procSpec struct {
	Plan     *vllm.ProcessPlan `json:"plan"`
	Host     string            `json:"host"`
	Runtime  Runtime           `json:"runtime"`
	Store    StoreURLs         `json:"store"`
	Timeouts Timeouts          `json:"timeouts"`
	Seed     int64             `json:"seed"`
	// Sequencer is the unix socket of the node's bind sequencer.
	Sequencer string `json:"sequencer"`
	// Steal lists the channels of this process whose TCP address the node takes before the
	// process binds it (Config.Steals).
	Steal []string `json:"steal,omitempty"`
}

// Phase is how far a process got in its start-up.
type Phase string

const (
	PhaseStarted Phase = "started"
	// PhaseRendezvous: every rendezvous of the process completed (or it had none).
	PhaseRendezvous Phase = "rendezvous-done"
	// PhaseUp: start-up complete but for the peers it dials (connectAddresses), which vLLM's
	// clients reach only once a request names them, after the deployment came up: its parent
	// may go on as for a ready one.
	PhaseUp Phase = "up"
	// PhaseReady: start-up complete; the process serves until told to stop.
	PhaseReady Phase = "ready"
	// PhaseWaiting: the process waits for ever for a process below it that hung (vLLM's front
	// end for an engine's READY, an engine core for its executor's workers).
	PhaseWaiting Phase = "waiting"
	PhaseExited  Phase = "exited"
)

// up: the process came up, as its parent waits for it (ready, or up and dialling its peers).
func (ph Phase) up() bool { return ph == PhaseReady || ph == PhaseUp }

// statusMsg is one line a process writes to its parent (fd 3): its own progress, or a
// descendant's, forwarded, so that every ancestor knows the latest record of its whole subtree
// and can report the exits of processes that could not.
type statusMsg struct {
	ID     string          `json:"id"`
	Phase  Phase           `json:"phase,omitempty"`
	Record *report.Process `json:"record,omitempty"`
	// Posted says the store accepted Record.
	Posted bool `json:"posted,omitempty"`
}

// controlMsg is a line a parent writes to a child's stdin after its spec.
type controlMsg struct {
	// Op "shutdown": the parent is failing and tears its children down (vLLM's executor shutdown).
	Op string `json:"op"`
}

const opShutdown = "shutdown"
