package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/widetp/widetp/internal/testbin"
)

// TestMain gives the runs of this package a widetp binary to start on their hosts: this test
// binary is widetp.test, so `run` (through self) uses $WIDETP_BIN, set here to a build of the
// command (or the one the caller named).
func TestMain(m *testing.M) {
	if _, err := testbin.Widetp(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
