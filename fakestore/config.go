package fakestore

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/internal/nodeapi"
)

// Flavor selects which real HTTP metadata server the metadata plane imitates byte for byte.
type Flavor string

const (
	// FlavorCPP is the server inside mooncake_master (mooncake-store/src/http_metadata_server.cpp).
	FlavorCPP Flavor = "cpp"
	// FlavorPython is the wheel's mooncake_http_metadata_server (mooncake-wheel/mooncake/http_metadata_server.py).
	FlavorPython Flavor = "python"
	// FlavorGo is the Go example (mooncake-transfer-engine/example/http-metadata-server/main.go).
	FlavorGo Flavor = "go"
)

// DuplicatePolicy is what MountSegment does with a segment name another client already holds.
type DuplicatePolicy string

const (
	// AcceptDuplicates mounts both segments, as the older master did (two segments, one name).
	AcceptDuplicates DuplicatePolicy = "accept"
	// RejectDuplicates answers INVALID_PARAMS, as the newer master's name-ownership check does.
	RejectDuplicates DuplicatePolicy = "reject"
)

// Default listen addresses. The master plane never uses 50051: that port belongs to the real
// master's binary RPC, and a real client pointed at the fake must fail loudly, not half-speak.
// They are the node contract's store ports (nodeapi.Store*Port), which the harness dials.
var (
	DefaultMetadataAddr = ":" + strconv.Itoa(nodeapi.StoreMetadataPort)
	DefaultMasterAddr   = ":" + strconv.Itoa(nodeapi.StoreMasterPort)
	DefaultAdminAddr    = ":" + strconv.Itoa(nodeapi.StoreAdminPort)
)

const (
	// DefaultClientTTL is Mooncake's default client_live_ttl_sec (10 s): a client that has not
	// pinged for this long is expired.
	DefaultClientTTL = 10 * time.Second
	// DefaultLeaseTTL is Mooncake's default_kv_lease_ttl (5000 ms): the read lease GetReplicaList
	// and BatchExistKey grant.
	DefaultLeaseTTL = 5 * time.Second
	// DefaultMaxBody caps request bodies at 1 MiB, aiohttp's default client_max_size: the largest
	// real metadata value (a ram descriptor with a few buffers) is a few KiB.
	DefaultMaxBody = 1 << 20
	// DefaultSweepInterval is Mooncake's kClientMonitorSleepMs (1 s): how often expiry is checked.
	DefaultSweepInterval = time.Second
	// putStartDiscardTimeout is Mooncake's put_start_discard_timeout_sec default (30 s): an
	// unfinished PutStart older than this may be replaced by a new one.
	putStartDiscardTimeout = 30 * time.Second
)

// Config configures a Server. Zero fields take the defaults above; New validates the result.
type Config struct {
	MetadataAddr string
	MasterAddr   string
	AdminAddr    string

	Flavor            Flavor
	DuplicateSegments DuplicatePolicy

	ClientTTL     time.Duration
	LeaseTTL      time.Duration
	SweepInterval time.Duration
	// MaxBody is the largest request body accepted, in bytes; larger ones get 413.
	MaxBody int64

	// Faults are installed when the server starts (cmd/fakestore's --fault flags).
	Faults []api.Fault

	// Clock drives TTLs, leases and fault durations; nil is the wall clock. Tests inject a
	// ManualClock so expiry needs no sleeping.
	Clock Clock
	// Logger receives one line per store action (expiry, faults); nil discards.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MetadataAddr == "" {
		c.MetadataAddr = DefaultMetadataAddr
	}
	if c.MasterAddr == "" {
		c.MasterAddr = DefaultMasterAddr
	}
	if c.AdminAddr == "" {
		c.AdminAddr = DefaultAdminAddr
	}
	if c.Flavor == "" {
		c.Flavor = FlavorCPP
	}
	if c.DuplicateSegments == "" {
		c.DuplicateSegments = AcceptDuplicates
	}
	if c.ClientTTL == 0 {
		c.ClientTTL = DefaultClientTTL
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.Clock == nil {
		c.Clock = WallClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	var errs []error
	switch c.Flavor {
	case FlavorCPP, FlavorPython, FlavorGo:
	default:
		errs = append(errs, fmt.Errorf("flavor %q: want cpp, python or go", c.Flavor))
	}
	switch c.DuplicateSegments {
	case AcceptDuplicates, RejectDuplicates:
	default:
		errs = append(errs, fmt.Errorf("duplicate-segments %q: want accept or reject", c.DuplicateSegments))
	}
	for name, addr := range map[string]string{"metadata": c.MetadataAddr, "master": c.MasterAddr, "admin": c.AdminAddr} {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s address %q: %w", name, addr, err))
			continue
		}
		if port == "50051" && name == "master" {
			errs = append(errs, fmt.Errorf("master address %q: 50051 is the real master's RPC port; the JSON master plane must not take it", addr))
		}
	}
	if c.ClientTTL < 0 || c.LeaseTTL < 0 || c.SweepInterval < 0 {
		errs = append(errs, errors.New("client TTL, lease TTL and sweep interval must not be negative"))
	}
	if c.MaxBody < 0 {
		errs = append(errs, fmt.Errorf("max body %d: must not be negative", c.MaxBody))
	}
	for i, f := range c.Faults {
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("fault %d (%s): %w", i+1, f, err))
		}
	}
	return errors.Join(errs...)
}
