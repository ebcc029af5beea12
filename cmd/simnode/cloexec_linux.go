package main

import (
	"os"
	"syscall"
)

func closeOnExec(f *os.File) { syscall.CloseOnExec(int(f.Fd())) }
