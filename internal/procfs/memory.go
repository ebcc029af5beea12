package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Pss is the process's proportional set size in KiB (the Pss line of /proc/<pid>/smaps_rollup):
// its private pages plus its share of every page it shares, so that the Pss of a host's processes
// add up to what they hold together.
func Pss(pid int) (int64, error) { return kib(pid, "smaps_rollup", "Pss:") }

// RSS is the process's resident set size in KiB (VmRSS of /proc/<pid>/status): every page it maps
// that is in memory, shared or not.
func RSS(pid int) (int64, error) { return kib(pid, "status", "VmRSS:") }

// kib reads the "field  N kB" line of /proc/<pid>/<file>.
func kib(pid int, file, field string) (int64, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/" + file
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return kibField(b, path, field)
}

// kibField finds the "field  N kB" line in b, the content of path.
func kibField(b []byte, path, field string) (int64, error) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		v, ok := bytes.CutPrefix(line, []byte(field))
		if !ok {
			continue
		}
		f := bytes.Fields(v)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("%s: %s %q: want a number of kB", path, field, v)
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %w", path, field, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s: no %s line", path, field)
}
