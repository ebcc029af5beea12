package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/internal/runtimes"
)

// fakeBuild writes a binary, a widetp binary and two "libraries" (one reached through a symlink, as
// Debian's /lib64/ld-linux-x86-64.so.2 is) and returns their paths.
func fakeBuild(t *testing.T) (bin, widetp string, l Linkage) {
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
	widetp = write("out/widetp", "ELF widetp", 0o755)
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
	return bin, widetp, Linkage{Loader: loaderLink, Libs: []string{libLink}}
}

var testProgram = runtimes.Program{Name: "prog"}

// archive is what tarImage sends the engine for testProgram: regular files by name.
func archive(t *testing.T, files []imageFile) (map[string]string, map[string]int64) {
	t.Helper()
	var buf bytes.Buffer
	if err := tarImage(&buf, dockerfile(testProgram), files); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	contents, modes := map[string]string{}, map[string]int64{}
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
		modes[hdr.Name] = hdr.Mode
		if hdr.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			contents[hdr.Name] = string(b)
		}
	}
	return contents, modes
}

func TestTarImageLaysOutTheImage(t *testing.T) {
	bin, widetp, l := fakeBuild(t)
	files := imageContents(testProgram, bin, widetp, l)
	got, modes := archive(t, files)
	if got["Dockerfile"] != string(dockerfile(testProgram)) || !strings.Contains(got["Dockerfile"], `ENTRYPOINT ["/usr/local/bin/prog"]`) {
		t.Errorf("Dockerfile = %q", got["Dockerfile"])
	}
	want := map[string]string{
		"rootfs/usr/local/bin/prog":    "ELF prog",
		"rootfs" + runtimes.WidetpPath: "ELF widetp",
		"rootfs" + l.Loader:            "ELF loader", // dereferenced: the bytes under the name asked for
		"rootfs" + l.Libs[0]:           "ELF libzmq",
	}
	for name, content := range want {
		if got[name] != content {
			t.Errorf("%s = %q, want %q", name, got[name], content)
		}
	}
	if len(got) != len(want)+1 {
		t.Errorf("archive files = %v, want the Dockerfile and %v", got, want)
	}
	if modes["rootfs/usr/local/bin/prog"]&0o100 == 0 {
		t.Errorf("binary mode = %o, want executable", modes["rootfs/usr/local/bin/prog"])
	}
	if modes["rootfs/tmp/"] != 0o1777 {
		t.Errorf("rootfs/tmp mode = %o, want 1777", modes["rootfs/tmp/"])
	}
}

func TestTheWidetpImageHoldsItsBinaryOnce(t *testing.T) {
	_, widetp, l := fakeBuild(t)
	files := imageContents(runtimes.Widetp, widetp, widetp, l, l)
	if len(files) != 3 {
		t.Fatalf("files = %v, want the binary, the loader and the library once each", files)
	}
}

func TestTarImageNamesAMissingLibrary(t *testing.T) {
	bin, widetp, l := fakeBuild(t)
	l.Libs = append(l.Libs, "/nonexistent/libgone.so.1")
	err := tarImage(io.Discard, dockerfile(testProgram), imageContents(testProgram, bin, widetp, l))
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/libgone.so.1") {
		t.Fatalf("error = %v, want one naming the missing library", err)
	}
	_, err = hashImage(dockerfile(testProgram), imageContents(testProgram, bin, widetp, l))
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/libgone.so.1") {
		t.Fatalf("hash error = %v, want one naming the missing library", err)
	}
}

func TestHashImageIsStableAndSeesEveryChange(t *testing.T) {
	bin, widetp, l := fakeBuild(t)
	hash := func(p runtimes.Program, files []imageFile) string {
		t.Helper()
		h, err := hashImage(dockerfile(p), files)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	files := imageContents(testProgram, bin, widetp, l)
	base := hash(testProgram, files)
	if len(base) != 64 {
		t.Fatalf("hash %q: want 64 hex digits", base)
	}
	// The same bytes copied elsewhere, at another time: the same hash (the cache hit).
	dir := t.TempDir()
	copied := filepath.Join(dir, "prog")
	if err := os.WriteFile(copied, []byte("ELF prog"), 0o755); err != nil {
		t.Fatal(err)
	}
	if h := hash(testProgram, imageContents(testProgram, copied, widetp, l)); h != base {
		t.Fatalf("identical contents hash differently: %s vs %s", base, h)
	}
	changed := func(content string, mode os.FileMode) string {
		p := filepath.Join(t.TempDir(), "prog")
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return hash(testProgram, imageContents(testProgram, p, widetp, l))
	}
	for name, h := range map[string]string{
		"content":    changed("ELF prog v2", 0o755),
		"mode":       changed("ELF prog", 0o700),
		"name":       hash(runtimes.Program{Name: "prog2"}, imageContents(runtimes.Program{Name: "prog2"}, bin, widetp, l)),
		"added file": hash(testProgram, append(append([]imageFile{}, files...), imageFile{src: bin, dst: "/extra"})),
	} {
		if h == base {
			t.Errorf("a change of %s leaves the hash unchanged", name)
		}
	}
	// A file rewritten in place (a new build at the same path) is hashed again.
	if err := os.WriteFile(bin, []byte("ELF prog, rebuilt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if h := hash(testProgram, files); h == base {
		t.Errorf("a binary rebuilt at its path keeps its old hash")
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
	e := &runtimes.ImageBuildError{Image: "widetp-widetp", Step: "engine build", Log: "Step 2/3 : COPY rootfs/ /\n", Err: errors.New("COPY failed")}
	msg := e.Error()
	for _, want := range []string{"build image widetp-widetp", "engine build", "COPY failed", "--- build log ---", "Step 2/3 : COPY rootfs/ /"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
}

func TestImageRef(t *testing.T) {
	h := strings.Repeat("ab", 32)
	if got, want := imageRef("hostprobe", h), "widetp-hostprobe:abababababababab"; got != want {
		t.Fatalf("imageRef = %q, want %q", got, want)
	}
	if got, want := imageRef("widetp", h), "widetp:abababababababab"; got != want {
		t.Fatalf("imageRef = %q, want %q", got, want)
	}
}

// An image of dynamically linked files carries the loader cache at its path (once), so that the
// loader opens the libraries without searching; an image of static binaries, or a machine without
// the cache, goes without.
func TestTheLoaderCacheGoesWithDynamicLinkage(t *testing.T) {
	bin, widetp, l := fakeBuild(t)
	cache := filepath.Join(t.TempDir(), "ld.so.cache")
	if err := os.WriteFile(cache, []byte("glibc-ld.so.cache1.1"), 0o644); err != nil {
		t.Fatal(err)
	}
	has := func(files []imageFile) int {
		n := 0
		for _, f := range files {
			if f.dst == cache {
				n++
			}
		}
		return n
	}
	files := withLoaderCache(imageContents(testProgram, bin, widetp, l), cache, l)
	if has(files) != 1 || !slices.IsSortedFunc(files, func(a, b imageFile) int { return strings.Compare(a.dst, b.dst) }) {
		t.Errorf("dynamic linkage: files = %v, want the cache %s once, sorted", files, cache)
	}
	if has(withLoaderCache(files, cache, l)) != 1 {
		t.Error("the cache was added a second time")
	}
	static := Linkage{Static: true}
	if has(withLoaderCache(imageContents(testProgram, bin, widetp, static), cache, static)) != 0 {
		t.Error("an image of static binaries got the loader cache")
	}
	if got := withLoaderCache(imageContents(testProgram, bin, widetp, l), filepath.Join(t.TempDir(), "none"), l); len(got) != len(imageContents(testProgram, bin, widetp, l)) {
		t.Errorf("a missing cache changed the image: %v", got)
	}
}
