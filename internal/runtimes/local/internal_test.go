//go:build linux

package local

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/widetp/widetp/internal/procfs"
	"github.com/widetp/widetp/internal/runtimes"
)

func TestOwnProcessInItsSession(t *testing.T) {
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := sessionProcs(sid)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.PID == os.Getpid() {
			if p.SID != sid || !p.Live() {
				t.Errorf("this process as listed: %+v", p)
			}
			return
		}
	}
	t.Errorf("this process (%d) is not among the %d processes of its session %d", os.Getpid(), len(procs), sid)
}

func TestExpandArgs(t *testing.T) {
	env := map[string]string{"WIDETP_LISTEN_IP": "127.4.9.1", "WIDETP_HOST": "store"}
	tests := []struct {
		name    string
		arg     string
		want    string
		wantErr string
	}{
		// Kubernetes' container args: $(VAR) expands, $$ escapes, anything else stays.
		{name: "no reference", arg: "--flavor=cpp", want: "--flavor=cpp"},
		{name: "listen address", arg: "--metadata-addr=$(WIDETP_LISTEN_IP):8080", want: "--metadata-addr=127.4.9.1:8080"},
		{name: "two references", arg: "$(WIDETP_HOST)@$(WIDETP_LISTEN_IP)", want: "store@127.4.9.1"},
		{name: "escaped", arg: "$$(WIDETP_HOST)", want: "$(WIDETP_HOST)"},
		{name: "shell style stays", arg: "$HOME and $", want: "$HOME and $"},
		{name: "unknown variable", arg: "$(NOPE):1", wantErr: "$(NOPE): no such variable"},
		{name: "not closed", arg: "x$(WIDETP_HOST", wantErr: "$( at byte 1 is not closed"},
		{name: "not a name", arg: "$(a b)", wantErr: "$(a b) at byte 0: not a variable name"},
	}
	for _, tt := range tests {
		got, err := runtimes.ExpandArgs([]string{"first", tt.arg}, env)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "argument 2") {
				t.Errorf("%s: error %v, want one naming argument 2 and %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got[1] != tt.want || got[0] != "first" {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in      string
		want    syscall.Signal
		wantErr string
	}{
		// The forms `docker kill --signal` takes.
		{in: "SIGKILL", want: syscall.SIGKILL},
		{in: "TERM", want: syscall.SIGTERM},
		{in: "sigstop", want: syscall.SIGSTOP},
		{in: "9", want: syscall.SIGKILL},
		{in: "0", wantErr: "out of range"},
		{in: "65", wantErr: "out of range"},
		{in: "SIGNOPE", wantErr: "unknown"},
	}
	for _, tt := range tests {
		got, err := parseSignal(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: got %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestAddrBlocks(t *testing.T) {
	a, err := reserveBlock("block-test")
	if err != nil {
		t.Fatal(err)
	}
	defer a.release()
	b, err := reserveBlock("block-test")
	if err != nil {
		t.Fatal(err)
	}
	if a.String() == b.String() {
		t.Fatalf("two live runs share block %s", a)
	}
	first, _ := a.host(0)
	last, _ := a.host(maxLocalHosts - 1)
	if want := netip.AddrFrom4([4]byte{127, a.a, a.b, 1}); first != want {
		t.Errorf("first host %s, want %s", first, want)
	}
	if last.As4()[3] != 254 || !last.IsLoopback() {
		t.Errorf("last host %s, want .254 on loopback", last)
	}
	if _, err := a.host(maxLocalHosts); err == nil || !strings.Contains(err.Error(), "holds 254 hosts") {
		t.Errorf("host 255: error %v", err)
	}
	if a.a == 0 || a.a == 255 {
		t.Errorf("block %s overlaps 127.0.0.0/24 or 127.255.0.0/16", a)
	}
	if err := a.checkBindable(); err != nil {
		t.Error(err)
	}
	// A released block is free again: the kernel frees the lock's name with its socket.
	name := b.String()
	if err := b.release(); err != nil {
		t.Fatal(err)
	}
	c, err := reserveBlock("block-test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	if c.String() != name {
		t.Errorf("after release, reserved %s; want the freed %s", c, name)
	}
}

func TestLocalEnv(t *testing.T) {
	t.Setenv("VLLM_LEAK", "1")
	env := localEnv("r0-head", netip.MustParseAddr("127.4.9.2"), "/run/x/r0-head", "store=127.4.9.1,r0-head=127.4.9.2",
		map[string]string{"VLLM_RPC_BASE_PATH": "/tmp", "PATH": "/opt/bin"})
	want := map[string]string{
		runtimes.EnvHost: "r0-head", runtimes.EnvListenIP: "127.4.9.2", runtimes.EnvIPCRoot: "/run/x/r0-head", EnvHosts: "store=127.4.9.1,r0-head=127.4.9.2",
		"HOSTNAME": "r0-head", "TMPDIR": "/run/x/r0-head/tmp", "HOME": "/run/x/r0-head",
		"VLLM_RPC_BASE_PATH": "/tmp", "PATH": "/opt/bin", // the spec's keys win
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["VLLM_LEAK"]; ok || len(env) != len(want) {
		t.Errorf("environment %v: want exactly %v (nothing of the harness's own)", env, want)
	}
	list := envList(env)
	for i := 1; i < len(list); i++ {
		if list[i-1] > list[i] {
			t.Fatalf("envList not sorted: %q", list)
		}
	}
}

// freeBlocks returns the run directory names of n blocks no run holds now.
func freeBlocks(t *testing.T, n int) []string {
	var names []string
	var held []*addrBlock
	for i := 0; i < n; i++ {
		b, err := reserveBlock(fmt.Sprintf("%s-%d", t.Name(), i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
		names = append(names, b.dirName())
	}
	for _, b := range held {
		b.release()
	}
	return names
}

func TestSweepLocal(t *testing.T) {
	base := t.TempDir()
	me, err := runtimes.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	dead := runtimes.Owner{Machine: me.Machine, PID: me.PID, Start: me.Start + 1} // same pid, another start: gone
	elsewhere := runtimes.Owner{Machine: me.Machine + "-other", PID: 1, Start: 1}
	held, err := reserveBlock(t.Name() + "-held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.release()
	free := freeBlocks(t, 5)
	type run struct{ owner, want string }
	runs := map[string]run{
		held.dirName(): {dead.String(), "kept: a live run holds its block"},
		free[0]:        {dead.String(), "swept"},
		free[1]:        {me.String(), "kept: its owner lives"},
		free[2]:        {elsewhere.String(), "kept: another machine's"},
		free[3]:        {"", "swept"}, // no owner file, and no run holds the block: nobody's
		free[4]:        {"not an owner", "swept"},
		"not-a-block":  {dead.String(), "kept: not a run directory"},
		"0.1":          {dead.String(), "kept: not a run directory"},
	}
	for name, r := range runs {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if r.owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(r.owner+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := sweepLocal(base, me.Machine)
	if err != nil || n != 3 {
		t.Fatalf("swept %d, %v; want 3", n, err)
	}
	for name, r := range runs {
		_, err := os.Stat(filepath.Join(base, name))
		if gone := os.IsNotExist(err); gone != (r.want == "swept") {
			t.Errorf("%s: gone=%v, want %s", name, gone, r.want)
		}
	}
	if n, err := sweepLocal(filepath.Join(base, "missing"), me.Machine); n != 0 || err != nil {
		t.Errorf("sweep of a missing base: %d, %v", n, err)
	}
}

func TestSweepEndsWhatADeadRunLeft(t *testing.T) {
	base := t.TempDir()
	me, err := runtimes.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	dead := runtimes.Owner{Machine: me.Machine, PID: me.PID, Start: me.Start + 1}
	// A leftover: a process in a session of its own, as a host's daemon would be.
	left := exec.Command("sleep", "600")
	left.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	defer left.Process.Kill()
	leftStart, err := runtimes.ProcessStart(left.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// A bystander whose pid a dead run recorded with another start time: the number was handed
	// out again, and the session is not the dead run's.
	bystander := exec.Command("sleep", "600")
	bystander.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { bystander.Process.Kill(); bystander.Wait() }()
	free := freeBlocks(t, 2)
	runs := map[string]string{
		free[0]: fmt.Sprintf("%d %d\n%d %d\n", left.Process.Pid, leftStart, bystander.Process.Pid, leftStart+12345),
		free[1]: "not a session\n",
	}
	for name, sessions := range runs {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(dead.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, sessionsFile), []byte(sessions), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := sweepLocal(base, me.Machine)
	if n != 1 || err == nil || !strings.Contains(err.Error(), `.sessions line 1 "not a session"`) {
		t.Fatalf("swept %d, %v; want 1 and an error naming the garbled line", n, err)
	}
	if _, err := os.Stat(filepath.Join(base, free[1])); err != nil {
		t.Errorf("a run whose leftovers are unknown was removed: %v", err)
	}
	// The sweep returned once the leftover was dead; as this process's child it was reaped too.
	if st, err := procfs.Read(left.Process.Pid); err == nil && st.Live() {
		t.Errorf("the leftover still runs: %+v", st)
	}
	if err := bystander.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the bystander was killed: %v", err)
	}
}

// A file where the runs' directory belongs is named in the error, with what to do about it.
func TestMakeLocalBaseRefusesAFile(t *testing.T) {
	base := filepath.Join(t.TempDir(), "widetp")
	if err := os.WriteFile(base, []byte("a binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := makeLocalBase(base)
	if err == nil || !strings.Contains(err.Error(), base+" is not a directory") || !strings.Contains(err.Error(), "TMPDIR") {
		t.Fatalf("makeLocalBase over a file: %v, want an error naming %s as not a directory", err, base)
	}
	dir := filepath.Join(t.TempDir(), "runs")
	if err := makeLocalBase(dir); err != nil {
		t.Fatalf("makeLocalBase(%s): %v", dir, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("made %s: %v %v, want a sticky directory", dir, fi, err)
	}
}
