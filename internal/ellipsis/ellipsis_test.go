package ellipsis

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"abcd", 0, "…"},
		{"abcd", -1, "…"},
		// "é" is two bytes: a cut inside it goes back to its start.
		{"aé", 2, "a…"},
		{"aéb", 3, "aé…"},
		// "€" is three bytes.
		{"€€", 4, "€…"},
		{"€€", 5, "€…"},
	} {
		if got := Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestCutKeepsValidUTF8(t *testing.T) {
	s := strings.Repeat("aé€😀", 8)
	for n := range len(s) + 1 {
		got := Cut(s, n)
		if !utf8.ValidString(got) {
			t.Fatalf("Cut(s, %d) = %q: not valid UTF-8", n, got)
		}
		body := strings.TrimSuffix(got, "…")
		if len(body) > n || !strings.HasPrefix(s, body) {
			t.Fatalf("Cut(s, %d) = %q: not a prefix of at most %d bytes", n, got, n)
		}
	}
}
