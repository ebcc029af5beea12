package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

// Image is a program's image as built (or found) for a run.
type Image struct {
	Program Program
	// Ref is "widetp-<name>:<hash prefix>".
	Ref string
	// Hash is the sha256 of the build context (Dockerfile, binary, libraries, loader, helper).
	Hash string
	// Cached is true when an image with Ref already existed and no build ran.
	Cached bool
}

// ImageBuildError is a failed image build (go build, ldd or the engine's build). It is an
// infrastructure failure: the CLI maps it to exit 3.
type ImageBuildError struct {
	Image string
	// Step is "go build", "ldd", "context" or "engine build".
	Step string
	// Log is the failing step's output (the compiler's or the engine's build log).
	Log string
	Err error
}

func (e *ImageBuildError) Error() string {
	msg := fmt.Sprintf("build image %s: %s: %v", e.Image, e.Step, e.Err)
	if strings.TrimSpace(e.Log) != "" {
		msg += "\n--- build log ---\n" + strings.TrimRight(e.Log, "\n")
	}
	return msg
}

func (e *ImageBuildError) Unwrap() error { return e.Err }

// hashLen is how much of the content hash the tag carries: 16 hex digits (64 bits) cannot collide
// among the few images one machine ever builds, and keep `docker images` readable.
const hashLen = 16

// imageRef is the tag of a program's image with the given content hash.
func imageRef(name, hash string) string { return "widetp-" + name + ":" + hash[:hashLen] }

// assembleContext lays out a build context in dir: the Dockerfile, and rootfs/ holding the binary
// at its image path, the ipcls helper, and every file of the linkage at its own absolute path
// (the loader is opened by absolute path, and with no ld.so.cache the loader searches the default
// multiarch directories ldd's paths come from). Symlinks are dereferenced: the image needs the
// bytes under the name the binary asks for.
func assembleContext(dir string, p Program, bin, helper string, l Linkage) error {
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), p.Dockerfile, 0o644); err != nil {
		return err
	}
	rootfs := filepath.Join(dir, "rootfs")
	copies := [][2]string{{bin, p.BinaryPath()}, {helper, ipclsPath}}
	for _, f := range l.Files() {
		copies = append(copies, [2]string{f, f})
	}
	for _, c := range copies {
		if err := copyFile(c[0], filepath.Join(rootfs, filepath.FromSlash(c[1]))); err != nil {
			return err
		}
	}
	// The tmpfs the runtime mounts at /tmp needs no mount point in the image (the engine makes
	// one), but a listing of an image without it is confusing; it costs nothing.
	return os.MkdirAll(filepath.Join(rootfs, "tmp"), 0o1777)
}

// copyFile copies src (following symlinks) to dst, keeping the permission bits.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s into the build context: %w", src, err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copy %s into the build context: %w", src, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("copy %s into the build context: not a regular file (%s)", src, info.Mode())
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("copy %s into the build context: %w", src, err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return fmt.Errorf("copy %s into the build context: %w", src, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s into the build context: %w", src, err)
	}
	return out.Close()
}

// contextFile is one file of a build context, as hashed and archived.
type contextFile struct {
	rel  string // slash-separated, relative to the context root
	mode fs.FileMode
	abs  string
}

// walkContext lists the regular files and directories of a context in a fixed order.
func walkContext(dir string) ([]contextFile, error) {
	var files []contextFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return fmt.Errorf("build context %s: %s is neither a file nor a directory", dir, p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, contextFile{rel: filepath.ToSlash(rel), mode: info.Mode(), abs: p})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	return files, nil
}

// hashContext is the content hash of a build context: every path, its type and permission bits and
// its bytes, in path order. Timestamps and owners are left out, so rebuilding the same sources
// (go build -trimpath is reproducible) gives the same hash and the engine build is skipped.
func hashContext(dir string) (string, error) {
	files, err := walkContext(dir)
	if err != nil {
		return "", fmt.Errorf("hash build context: %w", err)
	}
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%s\x00", f.rel, f.mode.String())
		if f.mode.IsRegular() {
			in, err := os.Open(f.abs)
			if err != nil {
				return "", fmt.Errorf("hash build context: %w", err)
			}
			n, err := io.Copy(h, in)
			in.Close()
			if err != nil {
				return "", fmt.Errorf("hash build context: %w", err)
			}
			fmt.Fprintf(h, "\x00%d\x00", n)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// tarContext archives a build context for the engine, with zeroed times and owners (the engine's
// layer then depends on the content alone).
func tarContext(dir string) (*bytes.Buffer, error) {
	files, err := walkContext(dir)
	if err != nil {
		return nil, fmt.Errorf("archive build context: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.rel, Mode: int64(f.mode.Perm()), Format: tar.FormatPAX}
		if f.mode&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		var size int64
		if f.mode.IsDir() {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			info, err := os.Stat(f.abs)
			if err != nil {
				return nil, fmt.Errorf("archive build context: %w", err)
			}
			hdr.Typeflag = tar.TypeReg
			size = info.Size()
			hdr.Size = size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archive build context: %w", err)
		}
		if f.mode.IsRegular() {
			in, err := os.Open(f.abs)
			if err != nil {
				return nil, fmt.Errorf("archive build context: %w", err)
			}
			_, err = io.Copy(tw, in)
			in.Close()
			if err != nil {
				return nil, fmt.Errorf("archive build context %s: %w", f.rel, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("archive build context: %w", err)
	}
	return &buf, nil
}

// goBuild compiles a package of the module at root into out. -trimpath and -buildvcs=false make
// the binary depend on the sources alone, which is what lets the content hash find a cached image.
func goBuild(ctx context.Context, root, pkg, out string, cgo bool) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cgoEnv := "CGO_ENABLED=0"
	if cgo {
		cgoEnv = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), cgoEnv)
	if b, err := cmd.CombinedOutput(); err != nil {
		return &ImageBuildError{Image: filepath.Base(out), Step: "go build", Log: string(b), Err: fmt.Errorf("go build %s: %w", pkg, err)}
	}
	return nil
}

func newImageBuilder(api client.APIClient, cfg config, work string, labels map[string]string) *imageBuilder {
	return &imageBuilder{api: api, root: cfg.moduleRoot, work: work, labels: labels, images: map[string]*imageOnce{},
		onBuild: func(img Image) { progressLine(cfg.progress, "built image %s", img.Ref) }}
}

// BuildImages builds the images of programs (or finds them by content hash) without starting a
// run: `widetp images`, and CI warming its cache. The images carry a run label of their own.
func BuildImages(ctx context.Context, programs []Program, opts ...Option) ([]Image, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	cli, err := newEngineClient()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	if err := ping(ctx, cli, cfg.pingTimeout); err != nil {
		return nil, err
	}
	owner, err := CurrentOwner()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "widetp-images-")
	if err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	defer os.RemoveAll(work)
	b := newImageBuilder(cli, cfg, work, map[string]string{LabelRun: cfg.runID, LabelOwner: owner.String()})
	ctx, cancel := context.WithTimeout(ctx, cfg.buildTimeout)
	defer cancel()
	images := make([]Image, len(programs))
	steps := make([]func() error, len(programs))
	for i, p := range programs {
		steps[i] = func() (err error) {
			images[i], err = b.image(ctx, p)
			return err
		}
	}
	if err := runConcurrently(steps); err != nil {
		return nil, err
	}
	return images, nil
}

// imageBuilder builds each program's image at most once per run; concurrent callers of one program
// wait for the same build.
type imageBuilder struct {
	api     client.APIClient
	root    string // module root
	work    string // scratch directory for binaries and contexts
	labels  map[string]string
	onBuild func(Image)

	mu     sync.Mutex
	images map[string]*imageOnce
	helper *imageOnce // the ipcls binary, shared by all images
}

type imageOnce struct {
	done chan struct{}
	img  Image
	path string
	err  error
}

// image returns p's image, building it first when no image has its content hash.
func (b *imageBuilder) image(ctx context.Context, p Program) (Image, error) {
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

// ipcls builds the listing helper once.
func (b *imageBuilder) ipcls(ctx context.Context) (string, error) {
	b.mu.Lock()
	o := b.helper
	if o == nil {
		o = &imageOnce{done: make(chan struct{})}
		b.helper = o
		b.mu.Unlock()
		o.path = filepath.Join(b.work, "bin", "widetp-ipcls")
		o.err = goBuild(ctx, b.root, ipclsPackage, o.path, false)
		close(o.done)
	} else {
		b.mu.Unlock()
	}
	select {
	case <-o.done:
		return o.path, o.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (b *imageBuilder) build(ctx context.Context, p Program) (Image, error) {
	if err := p.validate(); err != nil {
		return Image{}, err
	}
	helper, err := b.ipcls(ctx)
	if err != nil {
		return Image{}, err
	}
	bin := filepath.Join(b.work, "bin", p.Name)
	if err := goBuild(ctx, b.root, p.Package, bin, p.Cgo); err != nil {
		return Image{}, err
	}
	l, err := lddLinkage(ctx, bin)
	if err != nil {
		return Image{}, &ImageBuildError{Image: p.Name, Step: "ldd", Err: err}
	}
	dir := filepath.Join(b.work, "context", p.Name)
	if err := os.RemoveAll(dir); err != nil {
		return Image{}, &ImageBuildError{Image: p.Name, Step: "context", Err: err}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Image{}, &ImageBuildError{Image: p.Name, Step: "context", Err: err}
	}
	if err := assembleContext(dir, p, bin, helper, l); err != nil {
		return Image{}, &ImageBuildError{Image: p.Name, Step: "context", Err: err}
	}
	hash, err := hashContext(dir)
	if err != nil {
		return Image{}, &ImageBuildError{Image: p.Name, Step: "context", Err: err}
	}
	img := Image{Program: p, Ref: imageRef(p.Name, hash), Hash: hash}
	if found, err := b.exists(ctx, img.Ref); err != nil || found {
		img.Cached = found
		return img, err
	}
	unlock, err := lockBuild(ctx, img.Ref)
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	// Another process may have built it while this one waited for the lock.
	if found, err := b.exists(ctx, img.Ref); err != nil || found {
		img.Cached = found
		return img, err
	}
	if err := b.engineBuild(ctx, img, dir); err != nil {
		return Image{}, err
	}
	if b.onBuild != nil {
		b.onBuild(img)
	}
	return img, nil
}

func (b *imageBuilder) exists(ctx context.Context, ref string) (bool, error) {
	_, err := b.api.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("look up image %s: %w", ref, err)
	}
}

// engineBuild sends the context to the engine's classic builder. FROM scratch needs no pull, and
// PullParent stays false so that nothing ever asks a registry.
func (b *imageBuilder) engineBuild(ctx context.Context, img Image, dir string) error {
	tarball, err := tarContext(dir)
	if err != nil {
		return &ImageBuildError{Image: img.Ref, Step: "context", Err: err}
	}
	labels := map[string]string{LabelContent: img.Hash}
	for k, v := range b.labels {
		labels[k] = v
	}
	res, err := b.api.ImageBuild(ctx, tarball, client.ImageBuildOptions{
		Tags:        []string{img.Ref},
		Labels:      labels,
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		// The classic builder: BuildKit would need a session and, on old engines, pulls its
		// frontend image.
		Version: build.BuilderV1,
	})
	if err != nil {
		return &ImageBuildError{Image: img.Ref, Step: "engine build", Err: err}
	}
	defer res.Body.Close()
	log, err := readBuildStream(res.Body)
	if err != nil {
		return &ImageBuildError{Image: img.Ref, Step: "engine build", Log: log, Err: err}
	}
	return nil
}

// readBuildStream collects the engine's build log and returns the error it reports in-band (a
// build failure is a message in the stream, not an HTTP error).
func readBuildStream(r io.Reader) (string, error) {
	var log strings.Builder
	dec := json.NewDecoder(r)
	for {
		var m jsonstream.Message
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
		if m.Error != nil {
			log.WriteString(m.Error.Message + "\n")
			return log.String(), errors.New(m.Error.Message)
		}
	}
}
