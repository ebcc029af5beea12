package runtimes

import (
	"os"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseOwner(t *testing.T) {
	tests := []struct {
		in      string
		want    Owner
		wantErr string
	}{
		{in: "vm/27364/151224", want: Owner{Machine: "vm", PID: 27364, Start: 151224}},
		{in: "ci-runner.example/1/0", want: Owner{Machine: "ci-runner.example", PID: 1, Start: 0}},
		{in: "", wantErr: "want <machine>/<pid>/<start>"},
		{in: "27364/151224", wantErr: "want <machine>/<pid>/<start>"},
		{in: "vm/x/151224", wantErr: "bad pid"},
		{in: "vm/0/151224", wantErr: "bad pid"},
		{in: "vm/12/-1", wantErr: "bad start time"},
	}
	for _, tt := range tests {
		got, err := ParseOwner(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseOwner(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseOwner(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestOwnerLabelRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := Owner{
			Machine: rapid.StringMatching(`[a-zA-Z0-9][a-zA-Z0-9.-]{0,30}`).Draw(t, "machine"),
			PID:     rapid.IntRange(1, 1<<22).Draw(t, "pid"),
			Start:   rapid.Uint64().Draw(t, "start"),
		}
		got, err := ParseOwner(o.String())
		if err != nil || got != o {
			t.Fatalf("ParseOwner(%q) = %+v, %v; want %+v", o.String(), got, err, o)
		}
	})
}

func TestCurrentOwnerIsAliveAndAPastOneIsNot(t *testing.T) {
	me, err := CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	if me.PID != os.Getpid() {
		t.Fatalf("CurrentOwner().PID = %d, want %d", me.PID, os.Getpid())
	}
	if !me.Alive(me.Machine) {
		t.Fatalf("this process (%s) is not alive to itself", me)
	}
	// The same PID started at another time is a different process: PID reuse.
	reused := me
	reused.Start++
	if reused.Alive(me.Machine) {
		t.Fatalf("%s (a reused PID) counts as alive", reused)
	}
	// A PID beyond pid_max (4194304 at most) cannot exist.
	gone := Owner{Machine: me.Machine, PID: 1 << 23, Start: 1}
	if gone.Alive(me.Machine) {
		t.Fatalf("%s counts as alive", gone)
	}
	// Another machine's process table is not ours to read: never swept.
	if !gone.Alive("elsewhere") {
		t.Fatalf("an owner on another machine counts as dead")
	}
}

func TestOrphaned(t *testing.T) {
	live := Owner{Machine: "vm", PID: 10, Start: 5}
	alive := func(o Owner) bool { return o == live }
	tests := []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"not ours", map[string]string{"org.testcontainers": "true"}, false},
		{"a live owner's", map[string]string{LabelRun: "r1", LabelOwner: live.String()}, false},
		{"a dead owner's", map[string]string{LabelRun: "r1", LabelOwner: "vm/10/6"}, true},
		{"no owner label", map[string]string{LabelRun: "r1"}, true},
		{"unreadable owner label", map[string]string{LabelRun: "r1", LabelOwner: "??"}, true},
	}
	for _, tt := range tests {
		if got := Orphaned(tt.labels, alive); got != tt.want {
			t.Errorf("%s: orphaned = %v, want %v", tt.name, got, tt.want)
		}
	}
}
