package main

import (
	"context"
	"fmt"
	"io"

	"github.com/widetp/widetp/harness"
)

const imagesDescription = `
Builds the image a Docker run uses — FROM scratch with this widetp binary (its node and store
commands are what the hosts run) and the libraries it links — or finds it by content hash, and
prints its tag. Runs build what
they lack on their own; this builds ahead (make images, CI warming its cache). A failed build
prints its build log and exits 3, as does a missing Docker engine.`

func init() {
	register(&command{
		name:    "images",
		summary: "build the hosts' image from this binary (FROM scratch, by content hash)",
		usage:   "images",
		run:     images,
	})
}

func images(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(commands["images"], imagesDescription)
	pos, done, code := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "widetp images: takes no arguments, got %q\n", pos)
		return exitBadInput
	}
	imgs, err := harness.BuildImages(context.Background(), []harness.Program{harness.Widetp}, harness.WithProgress(stderr), harness.WithBinary(self()))
	if err != nil {
		fmt.Fprintf(stderr, "widetp images: %v\n", err)
		return exitInfra
	}
	for _, img := range imgs {
		state := "built"
		if img.Cached {
			state = "cached"
		}
		fmt.Fprintf(stdout, "%s\t%s\n", img.Ref, state)
	}
	return exitMatch
}
