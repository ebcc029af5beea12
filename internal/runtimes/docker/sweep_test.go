package docker

import (
	"testing"

	"github.com/widetp/widetp/internal/runtimes"
)

func TestRunFilter(t *testing.T) {
	if got := runFilter(""); !got["label"][runtimes.LabelRun] || len(got["label"]) != 1 {
		t.Fatalf("runFilter(\"\") = %v, want label=%s", got, runtimes.LabelRun)
	}
	if got := runFilter("abc"); !got["label"][runtimes.LabelRun+"=abc"] || len(got["label"]) != 1 {
		t.Fatalf("runFilter(abc) = %v, want label=%s=abc", got, runtimes.LabelRun)
	}
}
