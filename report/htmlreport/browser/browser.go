// Package browser opens widetp's HTML reports in a real headless Chromium (Debian's chromium,
// which scripts/deps.sh installs) over the DevTools protocol, for the tests and benchmarks that
// check what a reader sees: that the page loads with no console error, no uncaught exception, no
// dialog and no request, what its DOM holds once its script ran, how long it takes to paint, and
// a screenshot. Only tests import it: the widetp binary never starts a browser.
package browser

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// EnvChromium names a Chromium binary to use instead of the one on PATH.
const EnvChromium = "WIDETP_CHROMIUM"

// Chromium returns the path of the browser: $WIDETP_CHROMIUM, else the first of chromium,
// chromium-browser, google-chrome on PATH. The error says how to get one.
func Chromium() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("find Chromium: $%s=%s: %w", EnvChromium, p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("find Chromium: no chromium, chromium-browser or google-chrome on PATH (scripts/deps.sh installs Debian's chromium; or set " + EnvChromium + ")")
}

// Browser is one headless Chromium with one tab.
type Browser struct {
	ctx     context.Context // the tab's
	cancel  context.CancelFunc
	stopBro context.CancelFunc
	watched sync.WaitGroup

	mu       sync.Mutex
	problems []string
	page     string // the URL of the page being checked; requests to anything else are problems
}

// Option configures Start.
type Option func(*config)

type config struct{ width, height int }

// WithWindow sets the viewport (default 1400x1000: a laptop screen).
func WithWindow(width, height int) Option {
	return func(c *config) { c.width, c.height = width, height }
}

// startBound bounds starting the browser and opening its first tab.
const startBound = 30 * time.Second

// Start launches Chromium headless. Close stops it (and removes its profile directory).
func Start(ctx context.Context, opts ...Option) (*Browser, error) {
	c := config{width: 1400, height: 1000}
	for _, o := range opts {
		o(&c)
	}
	path, err := Chromium()
	if err != nil {
		return nil, err
	}
	flags := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		// Root (CI, containers) cannot use Chromium's sandbox; the pages are our own.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(c.width, c.height),
		chromedp.Flag("hide-scrollbars", true),
	)
	// The browser lives as long as the context of its first action: the tab's own, never one
	// with the caller's deadline (chromedp.Run). Each action is bounded separately (run).
	actx, stopBro := chromedp.NewExecAllocator(context.WithoutCancel(ctx), flags...)
	tctx, cancel := chromedp.NewContext(actx)
	b := &Browser{ctx: tctx, cancel: cancel, stopBro: stopBro}
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(tctx) }()
	select {
	case err = <-started:
	case <-time.After(startBound):
		err = fmt.Errorf("no tab within %s", startBound)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("start Chromium %s: %w", path, err)
	}
	if err := b.watch(); err != nil {
		b.Close()
		return nil, fmt.Errorf("start Chromium %s: watch the page: %w", path, err)
	}
	return b, nil
}

// run runs actions in the tab, bounded by ctx.
func (b *Browser) run(ctx context.Context, actions ...chromedp.Action[chromedp.Void]) error {
	actx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	err := chromedp.Do(actx, actions...)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

func (b *Browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// watch records every sign of a broken or unsafe page, from now until Close: console errors and
// warnings, uncaught exceptions, browser log errors (a blocked resource, a CSP violation),
// dialogs (dismissed, or the page would block) and requests for anything but the page itself.
// chromedp.Listen calls observe before the command that follows an event returns, so once an
// action returned, Problems holds everything the page did up to it.
func (b *Browser) watch() error {
	return chromedp.Listen(b.ctx, b.observe)
}

func (b *Browser) observe(ev any) {
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		switch e.Type {
		case runtime.ConsoleAPICalledTypeError, runtime.ConsoleAPICalledTypeWarning, runtime.ConsoleAPICalledTypeAssert:
			var args []string
			for _, a := range e.Args {
				if a.Description != "" {
					args = append(args, a.Description)
				} else {
					args = append(args, strings.Trim(string(a.Value), `"`))
				}
			}
			b.problem("console.%s: %s", e.Type, strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.problem("uncaught exception: %s", msg)
	case *log.EventEntryAdded:
		if en := e.Entry; en.Level == log.EntryLevelError || en.Level == log.EntryLevelWarning {
			b.problem("browser log %s (%s): %s %s", en.Level, en.Source, en.Text, en.URL)
		}
	case *page.EventJavascriptDialogOpening:
		b.problem("dialog %s opened: %q", e.Type, e.Message)
		// A dialog blocks the page until it is handled; observe must not run a command itself.
		b.watched.Add(1)
		go func() {
			defer b.watched.Done()
			chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}()
	case *network.EventRequestWillBeSent:
		b.mu.Lock()
		self := b.page
		b.mu.Unlock()
		if e.Request != nil && e.Request.URL != self && !strings.HasPrefix(e.Request.URL, "data:") {
			b.problem("request to %s", e.Request.URL)
		}
	}
}

// Problems lists what went wrong since the browser started: console errors and warnings,
// uncaught exceptions, browser log errors (a blocked resource, a CSP violation), dialogs opened,
// requests for anything but the page itself.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Open loads the page at path (a local file) and waits until its script has run and two frames
// have been painted. It returns the time from the start of the navigation to that paint, as the
// page measures it (performance.now(), whose origin is the navigation start).
func (b *Browser) Open(ctx context.Context, path string) (time.Duration, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	u := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	b.mu.Lock()
	b.page = u
	b.mu.Unlock()
	var ms float64
	err = b.run(ctx,
		chromedp.Navigate(u),
		chromedp.WaitReady(chromedp.CSS(`html[data-ready="true"]`)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) (err error) {
			ms, err = chromedp.Evaluate[float64](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))`,
				chromedp.EvalAwaitPromise)(ctx, t)
			return err
		}),
	)
	if err != nil {
		return 0, fmt.Errorf("open %s in Chromium: %w", path, err)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// Eval evaluates a JavaScript expression in the page and returns its value decoded from JSON.
func Eval[T any](ctx context.Context, b *Browser, expr string) (T, error) {
	var v T
	err := b.run(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) (err error) {
		v, err = chromedp.Evaluate[T](expr)(ctx, t)
		return err
	}))
	if err != nil {
		return v, fmt.Errorf("evaluate in the page: %w", err)
	}
	return v, nil
}

// Click clicks the first element that the CSS selector sel matches.
func (b *Browser) Click(ctx context.Context, sel string) error {
	if err := b.run(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)); err != nil {
		return fmt.Errorf("click %s: %w", sel, err)
	}
	return nil
}

// Screenshot writes a PNG of the viewport, or of the whole page with full, to path.
func (b *Browser) Screenshot(ctx context.Context, path string, full bool) error {
	var png []byte
	err := b.run(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) (err error) {
		shot := chromedp.CaptureScreenshot()
		if full {
			shot = chromedp.FullScreenshot(100)
		}
		png, err = shot(ctx, t)
		return err
	}))
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return nil
}

// Close stops the browser, waits for it to exit and removes its profile.
func (b *Browser) Close() {
	b.cancel()
	b.stopBro()
	b.watched.Wait()
}
