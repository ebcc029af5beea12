package harness

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// fakeBuild writes a binary, a helper and two "libraries" (one reached through a symlink, as
// Debian's /lib64/ld-linux-x86-64.so.2 is) and returns their paths.
func fakeBuild(t *testing.T) (bin, helper string, l Linkage) {
	t.Helper()
	src := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bin = write("out/prog", "ELF prog", 0o755)
	helper = write("out/ipcls", "ELF ipcls", 0o755)
	lib := write("lib/libzmq.so.5.2.4", "ELF libzmq", 0o644)
	real := write("lib/ld-2.36.so", "ELF loader", 0o755)
	libLink := filepath.Join(src, "lib/libzmq.so.5")
	loaderLink := filepath.Join(src, "lib64/ld.so.2")
	if err := os.Symlink(lib, libLink); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(loaderLink), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, loaderLink); err != nil {
		t.Fatal(err)
	}
	return bin, helper, Linkage{Loader: loaderLink, Libs: []string{libLink}}
}

var testProgram = Program{Name: "prog", Package: "./x", Dockerfile: []byte("FROM scratch\nCOPY rootfs/ /\n")}

func TestAssembleContextLaysOutTheImage(t *testing.T) {
	bin, helper, l := fakeBuild(t)
	dir := t.TempDir()
	if err := assembleContext(dir, testProgram, bin, helper, l); err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatalf("context lacks %s: %v", rel, err)
		}
		return string(b)
	}
	if got := read("Dockerfile"); got != string(testProgram.Dockerfile) {
		t.Errorf("Dockerfile = %q", got)
	}
	if got := read("rootfs/usr/local/bin/prog"); got != "ELF prog" {
		t.Errorf("binary = %q", got)
	}
	if got := read("rootfs" + ipclsPath); got != "ELF ipcls" {
		t.Errorf("helper = %q", got)
	}
	// Libraries and the loader sit at the absolute paths ldd named, dereferenced.
	for path, want := range map[string]string{l.Loader: "ELF loader", l.Libs[0]: "ELF libzmq"} {
		p := filepath.Join(dir, "rootfs", path)
		info, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("context lacks %s: %v", path, err)
		}
		if !info.Mode().IsRegular() {
			t.Errorf("%s is %s, want a regular file (symlinks dereferenced)", path, info.Mode())
		}
		if got := read(filepath.Join("rootfs", path)); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	info, err := os.Stat(filepath.Join(dir, "rootfs/usr/local/bin/prog"))
	if err != nil || info.Mode().Perm()&0o100 == 0 {
		t.Errorf("binary mode = %v (%v), want executable", info.Mode(), err)
	}
}

func TestAssembleContextNamesAMissingLibrary(t *testing.T) {
	bin, helper, l := fakeBuild(t)
	l.Libs = append(l.Libs, "/nonexistent/libgone.so.1")
	err := assembleContext(t.TempDir(), testProgram, bin, helper, l)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/libgone.so.1") {
		t.Fatalf("error = %v, want one naming the missing library", err)
	}
}

func TestHashContextIsStableAndSeesEveryChange(t *testing.T) {
	bin, helper, l := fakeBuild(t)
	build := func() string {
		dir := t.TempDir()
		if err := assembleContext(dir, testProgram, bin, helper, l); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	hash := func(dir string) string {
		h, err := hashContext(dir)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := build(), build()
	base := hash(a)
	if len(base) != 64 {
		t.Fatalf("hash %q: want 64 hex digits", base)
	}
	// Same content in another directory, at another time: same hash (the cache hit).
	if h := hash(b); h != base {
		t.Fatalf("identical contexts hash differently: %s vs %s", base, h)
	}
	changes := map[string]func(dir string) error{
		"content": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "rootfs/usr/local/bin/prog"), []byte("ELF prog v2"), 0o755)
		},
		"mode": func(dir string) error { return os.Chmod(filepath.Join(dir, "rootfs/usr/local/bin/prog"), 0o700) },
		"name": func(dir string) error {
			return os.Rename(filepath.Join(dir, "rootfs/usr/local/bin/prog"), filepath.Join(dir, "rootfs/usr/local/bin/prog2"))
		},
		"added file": func(dir string) error { return os.WriteFile(filepath.Join(dir, "rootfs/extra"), nil, 0o644) },
		"dockerfile": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644)
		},
	}
	for name, change := range changes {
		dir := build()
		if err := change(dir); err != nil {
			t.Fatal(err)
		}
		if h := hash(dir); h == base {
			t.Errorf("a change of %s leaves the hash unchanged", name)
		}
	}
}

func TestTarContextHoldsTheContextWithZeroedTimes(t *testing.T) {
	bin, helper, l := fakeBuild(t)
	dir := t.TempDir()
	if err := assembleContext(dir, testProgram, bin, helper, l); err != nil {
		t.Fatal(err)
	}
	buf, err := tarContext(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(buf)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.IsZero() && hdr.ModTime.Unix() != 0 {
			t.Errorf("%s has mtime %v, want none", hdr.Name, hdr.ModTime)
		}
		if hdr.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			files[hdr.Name] = string(b)
		}
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{"Dockerfile", "rootfs" + l.Libs[0], "rootfs" + l.Loader, "rootfs" + ipclsPath, "rootfs/usr/local/bin/prog"}
	for i := range want {
		want[i] = strings.TrimPrefix(filepath.ToSlash(want[i]), "/")
	}
	sort.Strings(want)
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("archive files = %v, want %v", names, want)
	}
	if files["rootfs/usr/local/bin/prog"] != "ELF prog" {
		t.Fatalf("binary in the archive = %q", files["rootfs/usr/local/bin/prog"])
	}
}

func TestReadBuildStream(t *testing.T) {
	ok := `{"stream":"Step 1/2 : FROM scratch\n"}` + "\n" + `{"stream":" ---\u003e \n"}` + "\n" + `{"aux":{"ID":"sha256:abc"}}` + "\n"
	log, err := readBuildStream(strings.NewReader(ok))
	if err != nil || !strings.Contains(log, "Step 1/2 : FROM scratch") {
		t.Fatalf("readBuildStream(ok) = %q, %v", log, err)
	}
	failed := `{"stream":"Step 2/2 : COPY missing /\n"}` + "\n" +
		`{"errorDetail":{"message":"COPY failed: file not found in build context"},"error":"COPY failed: file not found in build context"}` + "\n"
	log, err = readBuildStream(strings.NewReader(failed))
	if err == nil || !strings.Contains(err.Error(), "COPY failed") {
		t.Fatalf("readBuildStream(failed) error = %v, want the engine's message", err)
	}
	if !strings.Contains(log, "Step 2/2 : COPY missing /") {
		t.Fatalf("the build log %q lacks the failing step", log)
	}
	if _, err := readBuildStream(strings.NewReader(`{"stream":`)); err == nil {
		t.Fatalf("a truncated stream reads without error")
	}
}

func TestImageBuildErrorShowsTheLog(t *testing.T) {
	e := &ImageBuildError{Image: "widetp-simnode", Step: "go build", Log: "./main.go:3:1: syntax error\n", Err: errors.New("exit status 1")}
	msg := e.Error()
	for _, want := range []string{"build image widetp-simnode", "go build", "exit status 1", "--- build log ---", "./main.go:3:1: syntax error"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if !Infrastructure(e) || !Infrastructure(errors.Join(errors.New("x"), e)) {
		t.Errorf("an image build failure is not an infrastructure failure")
	}
}

func TestImageRef(t *testing.T) {
	h := strings.Repeat("ab", 32)
	if got, want := imageRef("simnode", h), "widetp-simnode:abababababababab"; got != want {
		t.Fatalf("imageRef = %q, want %q", got, want)
	}
}

func TestProgramValidate(t *testing.T) {
	for _, p := range []Program{SimNode, FakeStore} {
		if err := p.validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	bad := []struct {
		p    Program
		want string
	}{
		{Program{Name: "Sim_Node", Package: "./x", Dockerfile: []byte("x")}, "want [a-z0-9-]+"},
		{Program{Name: "x", Dockerfile: []byte("x")}, "no Go package"},
		{Program{Name: "x", Package: "./x"}, "no Dockerfile"},
	}
	for _, b := range bad {
		if err := b.p.validate(); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("validate(%+v) = %v, want %q", b.p, err, b.want)
		}
	}
}
