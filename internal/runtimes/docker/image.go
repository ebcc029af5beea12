package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/widetp/widetp/internal/runtimes"
	"github.com/widetp/widetp/internal/zmq"
)

// Image is a program's image as built (or found) for a run.
type Image struct {
	Program runtimes.Program
	// Ref is "widetp:<hash prefix>" (the widetp binary) or "widetp-<name>:<hash prefix>".
	Ref string
	// Hash is the sha256 of what the image holds (Dockerfile, binaries, libraries, loader).
	Hash string
	// Cached is true when an image with Ref already existed and no build ran.
	Cached bool
	// Volumes hold copies of the image's largest directories, which its containers mount in
	// their place (imageBuilder.volumes).
	Volumes []Volume
}

// hashLen is how much of the content hash the tag carries: 16 hex digits (64 bits) cannot collide
// among the few images one machine ever builds, and keep `docker images` readable.
const hashLen = 16

// imageRef is the tag of a program's image with the given content hash: widetp:<hash> for the
// widetp binary, widetp-<name>:<hash> for another program.
func imageRef(name, hash string) string {
	if name == runtimes.Widetp.Name {
		return "widetp:" + hash[:hashLen]
	}
	return "widetp-" + name + ":" + hash[:hashLen]
}

// dockerfile is every image's Dockerfile: no base image (nothing is ever pulled; no registry need
// be reachable), the files of rootfs/ at their paths, the program as the entrypoint.
func dockerfile(p runtimes.Program) []byte {
	return []byte("FROM scratch\nCOPY rootfs/ /\nENTRYPOINT [\"" + p.BinaryPath() + "\"]\n")
}

// imageFile is one file of an image: src on this machine, dst its absolute path in the image.
type imageFile struct {
	src, dst string
}

// imageContents lists what p's image holds: the program at its image path, the widetp binary (the
// listing helper, `widetp ipcls`), and every file of both linkages (loader and libraries) at its
// own absolute path (the kernel opens the loader by that path, and the loader finds the libraries
// there through this machine's cache, withLoaderCache, or in its default directories, where ldd's
// paths come from), sorted by destination.
func imageContents(p runtimes.Program, prog, widetp string, linkages ...Linkage) []imageFile {
	files := []imageFile{{src: prog, dst: p.BinaryPath()}}
	seen := map[string]bool{p.BinaryPath(): true}
	if !seen[runtimes.WidetpPath] {
		files = append(files, imageFile{src: widetp, dst: runtimes.WidetpPath})
		seen[runtimes.WidetpPath] = true
	}
	for _, l := range linkages {
		for _, f := range l.Files() {
			if !seen[f] {
				seen[f] = true
				files = append(files, imageFile{src: f, dst: f})
			}
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].dst < files[j].dst })
	return files
}

// ldCache is glibc's loader cache on this machine.
const ldCache = "/etc/ld.so.cache"

// withLoaderCache adds this machine's loader cache (path) to an image of dynamically linked files:
// the libraries are at the paths the cache names, so the loader opens each at once. Without it,
// every start of a process in the image first tried the loader's default directories and their
// glibc-hwcaps subdirectories, some 25 failed lookups through the container's file system for the
// binary's libraries, and as many again when it loads libzmq. A machine without the cache (or an
// image of static binaries) builds the image without it: the loader then searches, as before.
func withLoaderCache(files []imageFile, path string, ls ...Linkage) []imageFile {
	dynamic := false
	for _, l := range ls {
		dynamic = dynamic || l.Loader != ""
	}
	if fi, err := os.Stat(path); !dynamic || err != nil || !fi.Mode().IsRegular() {
		return files
	}
	for _, f := range files {
		if f.dst == path {
			return files
		}
	}
	files = append(files, imageFile{src: path, dst: path})
	sort.Slice(files, func(i, j int) bool { return files[i].dst < files[j].dst })
	return files
}

// hashImage is the content hash of an image: its Dockerfile, then every file's destination,
// permission bits and bytes, in destination order. Timestamps and owners are left out, so the
// same binary and libraries give the same hash and the engine build is skipped.
func hashImage(df []byte, files []imageFile) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "Dockerfile\x00%d\x00", len(df))
	h.Write(df)
	for _, f := range files {
		d, err := runtimes.DigestFile(f.src)
		if err != nil {
			return "", fmt.Errorf("hash image file %s: %w", f.dst, err)
		}
		fmt.Fprintf(h, "\x00%s\x00%s\x00%d\x00%s", f.dst, d.Mode, d.Size, d.Sum)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// tarImage archives an image's build context for the engine — the Dockerfile, and rootfs/ with
// every file at its destination, its parent directories and an empty /tmp — with zeroed times
// and owners (the engine's layer then depends on the content alone).
func tarImage(w io.Writer, df []byte, files []imageFile) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(df); err != nil {
		return err
	}
	dirs := map[string]bool{}
	addDir := func(dir string, mode int64) error {
		if dirs[dir] {
			return nil
		}
		dirs[dir] = true
		return tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: mode, Typeflag: tar.TypeDir, Format: tar.FormatPAX})
	}
	if err := addDir("rootfs", 0o755); err != nil {
		return err
	}
	// The tmpfs the runtime mounts at /tmp needs no mount point in the image (the engine makes
	// one), but a listing of an image without it is confusing; it costs nothing.
	if err := addDir("rootfs/tmp", 0o1777); err != nil {
		return err
	}
	for _, f := range files {
		name := "rootfs" + f.dst
		var parents []string
		for d := path.Dir(name); d != "rootfs" && d != "." && d != "/"; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := addDir(parents[i], 0o755); err != nil {
				return err
			}
		}
		if err := tarFile(tw, f.src, name); err != nil {
			return err
		}
	}
	return tw.Close()
}

func tarFile(tw *tar.Writer, src, name string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%s)", src, fi.Mode())
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, in); err != nil {
		return fmt.Errorf("archive %s: %w", src, err)
	}
	return nil
}

func newImageBuilder(api *engine, cfg runtimes.Config, labels map[string]string) *imageBuilder {
	return &imageBuilder{api: api, widetp: cfg.Binary, labels: labels, images: map[string]*imageOnce{},
		onBuild: func(img Image) { runtimes.ProgressLine(cfg.Progress, "built image %s", img.Ref) }}
}

// BuildImages builds the images of programs (or finds them by content hash) without starting a
// run: `widetp images`, and CI warming its cache. The images carry a run label of their own.
func BuildImages(ctx context.Context, programs []runtimes.Program, opts ...runtimes.Option) ([]Image, error) {
	cfg := runtimes.NewConfig(opts...)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	cli, err := newEngineClient()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	if err := ping(ctx, cli, cfg.PingTimeout); err != nil {
		return nil, err
	}
	owner, err := runtimes.CurrentOwner()
	if err != nil {
		return nil, err
	}
	b := newImageBuilder(cli, cfg, map[string]string{runtimes.LabelRun: cfg.RunID, runtimes.LabelOwner: owner.String()})
	ctx, cancel := context.WithTimeout(ctx, cfg.BuildTimeout)
	defer cancel()
	images := make([]Image, len(programs))
	steps := make([]func() error, len(programs))
	for i, p := range programs {
		steps[i] = func() (err error) {
			images[i], err = b.image(ctx, p)
			return err
		}
	}
	if err := runtimes.RunConcurrently(steps); err != nil {
		return nil, err
	}
	return images, nil
}

// imageBuilder builds each program's image at most once per runtime; concurrent callers of one
// program wait for the same build.
type imageBuilder struct {
	api     *engine
	widetp  string // the widetp binary
	labels  map[string]string
	onBuild func(Image)

	mu     sync.Mutex
	images map[string]*imageOnce
}

type imageOnce struct {
	done chan struct{}
	img  Image
	err  error
}

// image returns p's image, building it first when no image has its content hash.
func (b *imageBuilder) image(ctx context.Context, p runtimes.Program) (Image, error) {
	b.mu.Lock()
	o, ok := b.images[p.Name]
	if !ok {
		o = &imageOnce{done: make(chan struct{})}
		b.images[p.Name] = o
		b.mu.Unlock()
		o.img, o.err = b.build(ctx, p)
		if o.err != nil && ctx.Err() != nil {
			// This caller ran out of time; the next one may try again.
			b.mu.Lock()
			delete(b.images, p.Name)
			b.mu.Unlock()
		}
		close(o.done)
	} else {
		b.mu.Unlock()
	}
	select {
	case <-o.done:
		return o.img, o.err
	case <-ctx.Done():
		return Image{}, fmt.Errorf("wait for image %s: %w", p.Name, ctx.Err())
	}
}

// linkages are what ldd said of each binary, per process (a binary's linkage changes only with
// its bytes, and then its path's digest changes too; a stale entry costs a failed start at worst).
var linkages sync.Map // linkageKey -> Linkage

// linkageKey names a binary by path, size, modification time and inode.
type linkageKey struct {
	path  string
	size  int64
	mtime int64
	ino   uint64
}

func binaryLinkage(ctx context.Context, bin string) (Linkage, error) {
	fi, err := os.Stat(bin)
	if err != nil {
		return Linkage{}, err
	}
	key := linkageKey{path: bin, size: fi.Size(), mtime: fi.ModTime().UnixNano(), ino: runtimes.Inode(fi)}
	if l, ok := linkages.Load(key); ok {
		return l.(Linkage), nil
	}
	l, err := lddLinkage(ctx, bin)
	if err != nil {
		return Linkage{}, err
	}
	linkages.Store(key, l)
	return l, nil
}

// libzmqLinkage is libzmq's file, as this process loads it, with its own linkage.
func libzmqLinkage(ctx context.Context) (Linkage, error) {
	path, err := zmq.Path()
	if err != nil {
		return Linkage{}, err
	}
	l, err := binaryLinkage(ctx, path)
	if err != nil {
		return Linkage{}, err
	}
	l.Libs = append([]string{path}, l.Libs...)
	return l, nil
}

func (b *imageBuilder) build(ctx context.Context, p runtimes.Program) (Image, error) {
	if err := p.Validate(); err != nil {
		return Image{}, err
	}
	prog, err := runtimes.ProgramPath(p, b.widetp)
	if err != nil {
		return Image{}, &runtimes.ImageBuildError{Image: p.Name, Step: "context", Err: err}
	}
	var ls []Linkage
	for _, bin := range []string{prog, b.widetp} {
		l, err := binaryLinkage(ctx, bin)
		if err != nil {
			return Image{}, &runtimes.ImageBuildError{Image: p.Name, Step: "ldd", Err: err}
		}
		ls = append(ls, l)
	}
	// widetp loads libzmq at run time (internal/zmq), so ldd of the binary does not list it: the
	// image carries the file this machine loads, and what it links.
	zl, err := libzmqLinkage(ctx)
	if err != nil {
		return Image{}, &runtimes.ImageBuildError{Image: p.Name, Step: "libzmq", Err: err}
	}
	ls = append(ls, zl)
	files := withLoaderCache(imageContents(p, prog, b.widetp, ls...), ldCache, ls...)
	df := dockerfile(p)
	hash, err := hashImage(df, files)
	if err != nil {
		return Image{}, &runtimes.ImageBuildError{Image: p.Name, Step: "context", Err: err}
	}
	img := Image{Program: p, Ref: imageRef(p.Name, hash), Hash: hash}
	built, err := b.buildOnce(ctx, img, df, files)
	if err != nil {
		return Image{}, err
	}
	img.Cached = !built
	dirs, err := sharedDirs(files)
	if err != nil {
		return Image{}, &runtimes.ImageBuildError{Image: p.Name, Step: "context", Err: err}
	}
	if img.Volumes, err = b.volumes(ctx, img, dirs); err != nil {
		return Image{}, err
	}
	return img, nil
}

// buildOnce builds img unless an image with its tag exists, and says whether it built.
func (b *imageBuilder) buildOnce(ctx context.Context, img Image, df []byte, files []imageFile) (bool, error) {
	if found, err := b.exists(ctx, img.Ref); err != nil || found {
		return false, err
	}
	unlock, err := lockBuild(ctx, img.Ref)
	if err != nil {
		return false, err
	}
	defer unlock()
	// Another process may have built it while this one waited for the lock.
	if found, err := b.exists(ctx, img.Ref); err != nil || found {
		return false, err
	}
	if err := b.engineBuild(ctx, img, df, files); err != nil {
		return false, err
	}
	if b.onBuild != nil {
		b.onBuild(img)
	}
	return true, nil
}

// sharedDirMin is how many bytes of an image's files a directory must hold for its containers to
// mount it from a volume (sharedDirs): the binaries' and the libraries' directories, not the
// loader's, nor /etc with the loader cache (the engine mounts its hosts and resolver files there).
const sharedDirMin = 1 << 20

// A Volume holds a copy of one directory of an image, which its containers mount in its place.
type Volume struct {
	Name string
	Dir  string
}

// sharedDirs are the directories of an image's files that hold at least sharedDirMin bytes, sorted:
// the ones its containers mount from volumes (imageBuilder.volumes). The sizes are those the
// content hash read (runtimes.DigestFile, which remembers them).
func sharedDirs(files []imageFile) ([]string, error) {
	size := map[string]int64{}
	for _, f := range files {
		d, err := runtimes.DigestFile(f.src)
		if err != nil {
			return nil, fmt.Errorf("image file %s: %w", f.dst, err)
		}
		size[path.Dir(f.dst)] += d.Size
	}
	var dirs []string
	for d, n := range size {
		if n >= sharedDirMin && d != "/etc" {
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	return dirs, nil
}

// volumeName is the name of the volume that holds a copy of directory dir of image ref:
// widetp:<hash> and /usr/local/bin give widetp-<hash>-usr-local-bin.
func volumeName(ref, dir string) string {
	return strings.ReplaceAll(ref, ":", "-") + strings.ReplaceAll(dir, "/", "-")
}

// volumes returns the volumes that hold a copy of each of dirs of img, made (and filled) first
// where they do not exist. Containers mount them in place of their own copies: under a storage
// driver that gives every container a file system of its own (fuse-overlayfs, vfs), each
// container would read the 17 MiB widetp binary and its libraries through its own file system
// into a page cache of its own, some 16 MiB of memory and the CPU to fill it per host (at 64
// hosts, a quarter of the CPU the hosts' programs took), while a volume's files are files on the
// engine's own disk, cached once for every host; on overlay2 it changes nothing. Like the image,
// the volumes are keyed by its content and kept across runs; `widetp clean` removes them.
func (b *imageBuilder) volumes(ctx context.Context, img Image, dirs []string) ([]Volume, error) {
	vols := make([]Volume, len(dirs))
	for i, d := range dirs {
		vols[i] = Volume{Name: volumeName(img.Ref, d), Dir: d}
	}
	if all, err := b.volumesExist(ctx, vols); err != nil || all {
		return vols, err
	}
	unlock, err := lockBuild(ctx, img.Ref+"-volumes")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if all, err := b.volumesExist(ctx, vols); err != nil || all {
		return vols, err
	}
	// The engine makes each missing volume and copies the image's directory into it (the copy only
	// an empty volume gets) within the creation of a container that mounts them, which is never
	// started: no container sees a volume before it is full.
	labels := contentLabels(img, b.labels)
	var mounts []mount
	for _, v := range vols {
		mounts = append(mounts, mount{Type: "volume", Source: v.Name, Target: v.Dir, VolumeOptions: &volumeOptions{Labels: labels}})
	}
	id, err := b.api.ContainerCreate(ctx, "", containerCreate{Image: img.Ref, Labels: b.labels, HostConfig: hostConfig{Mounts: mounts}})
	if err != nil {
		return nil, &runtimes.ImageBuildError{Image: img.Ref, Step: "fill its volumes", Err: err}
	}
	if err := removeContainer(context.WithoutCancel(ctx), b.api, id); err != nil {
		return nil, &runtimes.ImageBuildError{Image: img.Ref, Step: "fill its volumes", Err: err}
	}
	return vols, nil
}

func (b *imageBuilder) volumesExist(ctx context.Context, vols []Volume) (bool, error) {
	for _, v := range vols {
		found, err := b.volumeExists(ctx, v.Name)
		if err != nil || !found {
			return false, err
		}
	}
	return true, nil
}

func (b *imageBuilder) volumeExists(ctx context.Context, name string) (bool, error) {
	_, err := b.api.VolumeInspect(ctx, name)
	return found(err, "volume "+name)
}

// found reads the answer to a look-up of what: there, not there, or an error that names it.
func found(err error, what string) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case isNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("look up %s: %w", what, err)
	}
}

// contentLabels are labels with img's content hash added: the labels of the image and its volumes.
func contentLabels(img Image, labels map[string]string) map[string]string {
	out := map[string]string{runtimes.LabelContent: img.Hash}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// volumeMounts mounts img's volumes in place of their directories, read-only. NoCopy: should a
// volume have gone since (a `widetp clean` meanwhile), the engine makes an empty one, labelled
// (with labels, the run's) for the next clean, and the container fails to start for want of its
// files instead of many containers filling one volume at once.
func volumeMounts(img Image, labels map[string]string) []mount {
	vl := contentLabels(img, labels)
	var out []mount
	for _, v := range img.Volumes {
		out = append(out, mount{Type: "volume", Source: v.Name, Target: v.Dir, ReadOnly: true,
			VolumeOptions: &volumeOptions{NoCopy: true, Labels: vl}})
	}
	return out
}

func (b *imageBuilder) exists(ctx context.Context, ref string) (bool, error) {
	return found(b.api.ImageInspect(ctx, ref), "image "+ref)
}

// engineBuild streams the context to the engine's classic builder. FROM scratch needs no pull,
// and PullParent stays false so that nothing ever asks a registry.
func (b *imageBuilder) engineBuild(ctx context.Context, img Image, df []byte, files []imageFile) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarImage(pw, df, files)) }()
	defer pr.Close()
	body, err := b.api.ImageBuild(ctx, pr, img.Ref, contentLabels(img, b.labels))
	if err != nil {
		return &runtimes.ImageBuildError{Image: img.Ref, Step: "engine build", Err: err}
	}
	defer body.Close()
	log, err := readBuildStream(body)
	if err != nil {
		return &runtimes.ImageBuildError{Image: img.Ref, Step: "engine build", Log: log, Err: err}
	}
	return nil
}

// readBuildStream collects the engine's build log and returns the error it reports in-band (a
// build failure is a message in the stream, not an HTTP error).
func readBuildStream(r io.Reader) (string, error) {
	var log strings.Builder
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Stream, Status string
			Error          string                    `json:"error"`
			Detail         *struct{ Message string } `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return log.String(), nil
			}
			return log.String(), fmt.Errorf("read build output: %w", err)
		}
		log.WriteString(m.Stream)
		if m.Status != "" {
			log.WriteString(m.Status + "\n")
		}
		if m.Detail != nil && m.Detail.Message != "" {
			m.Error = m.Detail.Message
		}
		if m.Error != "" {
			log.WriteString(m.Error + "\n")
			return log.String(), errors.New(m.Error)
		}
	}
}
