package docker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
)

// The directories an image's containers mount from volumes are those that hold at least a MiB of
// its files (the binaries', the libraries'), never /etc, where the engine mounts the container's
// hosts and resolver files; a file that is not there is named.
func TestSharedDirsAreTheLargeDirectories(t *testing.T) {
	src := t.TempDir()
	file := func(name string, size int) string {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := []imageFile{
		{src: file("widetp", sharedDirMin), dst: "/usr/local/bin/widetp"},
		{src: file("libc", sharedDirMin/2), dst: "/lib/x86_64-linux-gnu/libc.so.6"},
		{src: file("libzmq", sharedDirMin/2), dst: "/lib/x86_64-linux-gnu/libzmq.so.5"},
		{src: file("ld", sharedDirMin-1), dst: "/lib64/ld-linux-x86-64.so.2"},
		{src: file("cache", 2*sharedDirMin), dst: "/etc/ld.so.cache"},
	}
	dirs, err := sharedDirs(files)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/lib/x86_64-linux-gnu", "/usr/local/bin"}; !slices.Equal(dirs, want) {
		t.Errorf("sharedDirs = %v, want %v", dirs, want)
	}
	_, err = sharedDirs(append(files, imageFile{src: filepath.Join(src, "gone"), dst: "/usr/local/bin/gone"}))
	if err == nil || !strings.Contains(err.Error(), "/usr/local/bin/gone") {
		t.Errorf("a missing file: %v", err)
	}
}

// A volume's name is the image's tag and the directory, and a name the engine accepts.
func TestVolumeName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`) // moby's volume name rule
	for _, c := range []struct{ ref, dir, want string }{
		{"widetp:0123456789abcdef", "/usr/local/bin", "widetp-0123456789abcdef-usr-local-bin"},
		{"widetp-hostprobe:0123456789abcdef", "/lib/x86_64-linux-gnu", "widetp-hostprobe-0123456789abcdef-lib-x86_64-linux-gnu"},
	} {
		got := volumeName(c.ref, c.dir)
		if got != c.want || !valid.MatchString(got) {
			t.Errorf("volumeName(%q, %q) = %q, want %q", c.ref, c.dir, got, c.want)
		}
	}
}

// A host's container mounts every volume of its image read-only, never has the engine copy into
// one (a volume gone meanwhile comes back empty and labelled, and the host fails to start), and an
// image without volumes mounts nothing.
func TestVolumeMountsAreReadOnlyAndNeverCopy(t *testing.T) {
	img := Image{Ref: "widetp:0123456789abcdef", Hash: "0123456789abcdef00", Volumes: []Volume{
		{Name: "widetp-0123456789abcdef-lib", Dir: "/lib"}, {Name: "widetp-0123456789abcdef-usr-local-bin", Dir: "/usr/local/bin"}}}
	ms := volumeMounts(img, map[string]string{runtimes.LabelRun: "r1"})
	if len(ms) != 2 {
		t.Fatalf("mounts = %+v, want 2", ms)
	}
	for i, m := range ms {
		if m.Type != "volume" || m.Source != img.Volumes[i].Name || m.Target != img.Volumes[i].Dir || !m.ReadOnly ||
			m.VolumeOptions == nil || !m.VolumeOptions.NoCopy ||
			m.VolumeOptions.Labels[runtimes.LabelRun] != "r1" || m.VolumeOptions.Labels[runtimes.LabelContent] != img.Hash {
			t.Errorf("mount %d = %+v (options %+v)", i, m, m.VolumeOptions)
		}
	}
	if ms := volumeMounts(Image{Ref: "widetp:x"}, nil); ms != nil {
		t.Errorf("an image without volumes: mounts %+v", ms)
	}
}

// fakeVolumes is an engine that knows some volumes and records the containers created and removed.
type fakeVolumes struct {
	mu       sync.Mutex
	have     map[string]bool
	failFill bool
	created  []containerCreate
	removed  []string
}

func (f *fakeVolumes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.URL.Path == "/_ping":
		w.Header().Set("Api-Version", "1.41")
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/volumes/"):
		name := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		if !f.have[name] {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"get ` + name + `: no such volume"}`))
			return
		}
		_, _ = w.Write([]byte(`{"Name":"` + name + `"}`))
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/containers/create"):
		var c containerCreate
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.created = append(f.created, c)
		if f.failFill {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"message":"no space left on device"}`))
			return
		}
		for _, m := range c.HostConfig.Mounts {
			f.have[m.Source] = true
		}
		_, _ = w.Write([]byte(`{"Id":"filler"}`))
	case r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/containers/"):
		f.removed = append(f.removed, r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusInternalServerError)
	}
}

// Volumes that exist are used as they are; missing ones are made and filled by the engine within
// the creation of one container that mounts them all, copying allowed and labelled with the run
// and the content, which is removed without being started; a failed fill names the step.
func TestVolumesAreFilledOnceByAContainerNeverStarted(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the fill's lock file
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	img := Image{Ref: "widetp:0123456789abcdef", Hash: "0123456789abcdef00"}
	dirs := []string{"/lib", "/usr/local/bin"}
	labels := map[string]string{runtimes.LabelRun: "r1", runtimes.LabelOwner: "m/1/2"}

	f := &fakeVolumes{have: map[string]bool{"widetp-0123456789abcdef-lib": true, "widetp-0123456789abcdef-usr-local-bin": true}}
	b := &imageBuilder{api: engineOnSocket(t, f), labels: labels}
	vols, err := b.volumes(ctx, img, dirs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Volume{{"widetp-0123456789abcdef-lib", "/lib"}, {"widetp-0123456789abcdef-usr-local-bin", "/usr/local/bin"}}; !slices.Equal(vols, want) {
		t.Errorf("volumes = %v, want %v", vols, want)
	}
	if len(f.created) != 0 {
		t.Errorf("volumes that exist were filled again: %+v", f.created)
	}

	f = &fakeVolumes{have: map[string]bool{"widetp-0123456789abcdef-lib": true}}
	b = &imageBuilder{api: engineOnSocket(t, f), labels: labels}
	if _, err := b.volumes(ctx, img, dirs); err != nil {
		t.Fatal(err)
	}
	if len(f.created) != 1 || !slices.Equal(f.removed, []string{"filler"}) {
		t.Fatalf("created %d container(s), removed %v: want one filler, removed", len(f.created), f.removed)
	}
	c := f.created[0]
	if c.Image != img.Ref || c.Labels[runtimes.LabelRun] != "r1" || len(c.HostConfig.Mounts) != 2 {
		t.Errorf("filler = %+v", c)
	}
	for i, m := range c.HostConfig.Mounts {
		if m.Source != vols[i].Name || m.Target != vols[i].Dir || m.ReadOnly || m.VolumeOptions == nil || m.VolumeOptions.NoCopy ||
			m.VolumeOptions.Labels[runtimes.LabelRun] != "r1" || m.VolumeOptions.Labels[runtimes.LabelContent] != img.Hash {
			t.Errorf("filler mount %d = %+v (options %+v): want the volume at its directory, copying allowed, labelled", i, m, m.VolumeOptions)
		}
	}

	f = &fakeVolumes{have: map[string]bool{}, failFill: true}
	b = &imageBuilder{api: engineOnSocket(t, f), labels: labels}
	_, err = b.volumes(ctx, img, dirs)
	var be *runtimes.ImageBuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "fill its volumes") || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("a fill that fails: %v", err)
	}
}
