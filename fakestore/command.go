package fakestore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/internal/nodeapi"
)

// shutdownTimeout bounds a clean shutdown: in-flight requests (at most a long poll, which Close
// releases at once) get this long before connections are cut.
const shutdownTimeout = 5 * time.Second

// ReadyLine starts the line `widetp store` prints on stdout once every listener is up (the
// harness waits for it).
const ReadyLine = nodeapi.StoreReady

// Command is `widetp store`: it runs the fake Mooncake store — the HTTP metadata server, the
// master's operations as JSON over HTTP, the master's admin endpoints and the test endpoints under
// /_widetp/ — until ctx ends (the caller cancels it on SIGTERM or SIGINT), then shuts down cleanly.
// It returns the exit status: 0 after a clean shutdown, 2 for bad flags, 1 for a failure to serve.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fakestore: %v\n", err)
		return 2
	}
	s, err := New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "fakestore: %v\n", err)
		return 2
	}
	if err := s.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "fakestore: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, ReadyLine+"%s metadata=%s master=%s admin=%s\n",
		cfg.Flavor, s.URL(api.PlaneMetadata), s.URL(api.PlaneMaster), s.URL(api.PlaneAdmin))
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := s.Close(sctx); err != nil {
		fmt.Fprintf(stderr, "fakestore: shutdown: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "fakestore: stopped")
	return 0
}

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("widetp store", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: widetp store [flags]

Runs a fake Mooncake store on three listeners:
  metadata  GET/PUT/DELETE /metadata?key=  (byte-compatible with the chosen --flavor)
  master    POST /master/<Op> with JSON    (never on 50051, the real master's RPC port)
  admin     /health /metrics /get_all_segments /get_segments_detail /get_all_keys /query_key,
            and the test endpoints under /_widetp/ (reports, registrations, events, snapshot,
            reset, sweep, faults)
Stops cleanly on SIGTERM or SIGINT.

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), `
A --fault is comma-separated key=value pairs; kinds: %v. Examples:
  --fault kind=latency,plane=metadata,method=PUT,latency=200ms,count=3
  --fault kind=status,plane=metadata,key='*rpc_meta*',status=404,duration=10s
  --fault kind=ignore-pings,client=<client id>
`, api.FaultKinds)
	}
	fs.StringVar(&cfg.MetadataAddr, "metadata-addr", DefaultMetadataAddr, "listen address of the HTTP metadata server")
	fs.StringVar(&cfg.MasterAddr, "master-addr", DefaultMasterAddr, "listen address of the master's JSON operations")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", DefaultAdminAddr, "listen address of the admin and test endpoints")
	flavor := fs.String("flavor", string(FlavorCPP), "metadata server to imitate: cpp, python or go")
	dup := fs.String("duplicate-segments", string(AcceptDuplicates), "a segment name another client holds: accept (older master) or reject (newer)")
	fs.DurationVar(&cfg.ClientTTL, "client-ttl", DefaultClientTTL, "a client that does not ping for this long expires")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", DefaultLeaseTTL, "read lease granted by GetReplicaList and BatchExistKey")
	fs.Int64Var(&cfg.MaxBody, "max-body", DefaultMaxBody, "largest request body in bytes (larger: 413)")
	verbose := fs.Bool("v", false, "log store actions (expiry, faults) to stderr")
	fs.Func("fault", "install a fault at start (repeatable; see below)", func(v string) error {
		f, err := api.ParseFault(v)
		if err != nil {
			return err
		}
		cfg.Faults = append(cfg.Faults, f)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q (widetp store takes only flags)", fs.Args())
	}
	cfg.Flavor = Flavor(*flavor)
	cfg.DuplicateSegments = DuplicatePolicy(*dup)
	if cfg.ClientTTL <= 0 || cfg.LeaseTTL <= 0 || cfg.MaxBody <= 0 {
		return cfg, fmt.Errorf("--client-ttl, --lease-ttl and --max-body must be positive")
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	return cfg, nil
}
