package procfs

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestCallsFindsAThreadBlockedInRead: a thread of this process blocked in read(2) of a pipe shows
// up with the call's number and the pipe's descriptor; once it is let go, it does not.
func TestCallsFindsAThreadBlockedInRead(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(p[0])
	defer syscall.Close(p[1])
	read := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, err := syscall.Read(p[0], make([]byte, 1)) // a blocking descriptor: the thread waits in the kernel
		read <- err
	}()
	blocked := func() bool {
		calls, err := Calls(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			if c.NR == syscall.SYS_READ && c.Arg0 == uint64(p[0]) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !blocked(); {
		if time.Now().After(deadline) {
			t.Fatalf("no thread of this process was seen in read(2) of descriptor %d within 10 s", p[0])
		}
		runtime.Gosched()
	}
	if _, err := syscall.Write(p[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if blocked() {
		t.Errorf("a thread is still seen in read(2) of descriptor %d after the read returned", p[0])
	}
}

func TestCallsOfAProcessThatEnded(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Calls(cmd.Process.Pid); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Calls of a reaped child: %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestParseCall(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Call
		blocked bool
		bad     bool
	}{
		{in: "running\n"},
		{in: "-1 0x7ffc91099c10 0x7f2e12b8eaec\n"},
		{in: "0 0x5 0x7ffc 0x1 0x0 0x0 0x0 0x7ffc91099be0 0x7f2e12b8eaec\n", want: Call{NR: 0, Arg0: 5}, blocked: true},
		{in: "247 0x1 0xa 0x0 0x4 0x0 0x0 0x7ffc 0x7f2e\n", want: Call{NR: 247, Arg0: 1}, blocked: true},
		{in: "", bad: true},
		{in: "read 0x5", bad: true},
		{in: "0 0x5 0x7ffc", bad: true},
		{in: "0 zz 0x0 0x0 0x0 0x0 0x0 0x7ffc 0x7f2e", bad: true},
	} {
		got, blocked, err := parseCall(c.in)
		if (err != nil) != c.bad {
			t.Errorf("parseCall(%q): error %v, want one: %v", c.in, err, c.bad)
			continue
		}
		if got != c.want || blocked != c.blocked {
			t.Errorf("parseCall(%q) = %+v, %v; want %+v, %v", c.in, got, blocked, c.want, c.blocked)
		}
	}
}
