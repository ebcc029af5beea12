package main

import (
	"context"
	"fmt"
	"io"

	"github.com/widetp/widetp/harness"
)

const imagesDescription = `
Builds the images a Docker run uses — simnode and the fake store, FROM scratch with the binary and
the libraries it links — or finds them by content hash, and prints their tags. Runs build what
they lack on their own; this builds ahead (make images, CI warming its cache). A failed build
prints its build log and exits 3, as does a missing Docker engine.`

func init() {
	register(&command{
		name:    "images",
		summary: "build the simnode and fake store images (FROM scratch, by content hash)",
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
	imgs, err := harness.BuildImages(context.Background(), []harness.Program{harness.SimNode, harness.FakeStore}, harness.WithProgress(stderr))
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
