package main

import (
	"context"
	"fmt"
	"io"

	"github.com/widetp/widetp/harness"
)

const cleanDescription = `
Removes everything labelled io.widetp.run on the Docker engine — containers, networks, images and
the volumes that hold a copy of each image's binaries, whoever made them — and every run's
nftables tables (widetp_*: its partitions, its network kept out of the connection tracker), and
says how many of each. Runs remove what they make and sweep what killed runs left; clean is for a
machine you want back as it was (make clean). Do not run it while runs are in flight: it removes
their nodes too. Exit 3 when no Docker engine answers.`

func init() {
	register(&command{
		name:    "clean",
		summary: "remove every container, network, image and volume labelled io.widetp.run, and every run's nftables tables",
		usage:   "clean",
		run:     clean,
	})
}

func clean(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(commands["clean"], cleanDescription)
	pos, done, code := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "widetp clean: takes no arguments, got %q\n", pos)
		return exitBadInput
	}
	n, nerr := harness.CleanPartitions(context.Background())
	if nerr == nil {
		fmt.Fprintf(stdout, "removed %d nftables table(s) of runs\n", n)
	}
	s, err := harness.Clean(context.Background())
	fmt.Fprintf(stdout, "removed %d container(s), %d network(s), %d image(s), %d volume(s) labelled %s\n", s.Containers, s.Networks, s.Images, s.Volumes, harness.LabelRun)
	if err != nil || nerr != nil {
		for _, e := range []error{nerr, err} {
			if e != nil {
				fmt.Fprintf(stderr, "widetp clean: %v\n", e)
			}
		}
		return exitInfra
	}
	return exitMatch
}
