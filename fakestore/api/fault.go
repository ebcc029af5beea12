package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseFault reads a fault in the flag syntax: comma-separated key=value pairs with the JSON field
// names, e.g. "kind=latency,plane=metadata,method=PUT,latency=200ms,count=3". Body may not
// contain a comma.
func ParseFault(s string) (Fault, error) {
	var f Fault
	if strings.TrimSpace(s) == "" {
		return f, fmt.Errorf("parse fault %q: empty", s)
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok {
			return f, fmt.Errorf("parse fault %q: %q is not key=value", s, part)
		}
		var err error
		switch k {
		case "kind":
			f.Kind = v
		case "plane":
			f.Plane = Plane(v)
		case "method":
			f.Method = v
		case "key":
			f.Key = v
		case "peer":
			f.Peer = v
		case "count":
			f.Count, err = strconv.Atoi(v)
		case "duration":
			err = parseDuration(v, &f.Duration)
		case "latency":
			err = parseDuration(v, &f.Latency)
		case "status":
			f.Status, err = strconv.Atoi(v)
		case "code":
			var c int64
			c, err = strconv.ParseInt(v, 10, 32)
			f.Code = Code(c)
		case "body":
			f.Body = v
		case "segment":
			f.Segment = v
		case "client":
			f.Client = v
		default:
			return f, fmt.Errorf("parse fault %q: unknown field %q", s, k)
		}
		if err != nil {
			return f, fmt.Errorf("parse fault %q: field %s: %w", s, k, err)
		}
	}
	return f, f.Validate()
}

func parseDuration(v string, d *Duration) error {
	x, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	*d = Duration(x)
	return nil
}

// Validate reports the first thing wrong with a fault, naming the field.
func (f Fault) Validate() error {
	if !slices.Contains(FaultKinds, f.Kind) {
		return fmt.Errorf("fault kind %q: want one of %s", f.Kind, strings.Join(FaultKinds, ", "))
	}
	switch f.Plane {
	case "", PlaneMetadata, PlaneMaster, PlaneAdmin:
	default:
		return fmt.Errorf("fault %s: plane %q: want metadata, master or admin (test endpoints take no faults)", f.Kind, f.Plane)
	}
	if f.Count < 0 {
		return fmt.Errorf("fault %s: count %d is negative", f.Kind, f.Count)
	}
	if f.Duration < 0 || f.Latency < 0 {
		return fmt.Errorf("fault %s: negative duration or latency", f.Kind)
	}
	switch f.Kind {
	case FaultLatency:
		if f.Latency <= 0 {
			return fmt.Errorf("fault latency: latency must be > 0")
		}
	case FaultRefuse:
		// A connection is refused before its request is read: only plane and peer are known.
		if f.Method != "" || f.Key != "" {
			return fmt.Errorf("fault refuse: only plane and peer can scope it (method %q, key %q given)", f.Method, f.Key)
		}
	case FaultStatus:
		if f.Status == 0 && f.Code == 0 {
			return fmt.Errorf("fault status: set status (HTTP) or code (Mooncake error code)")
		}
		if f.Status != 0 && (f.Status < 200 || f.Status > 599 || http.StatusText(f.Status) == "") {
			return fmt.Errorf("fault status: status %d is not an HTTP status", f.Status)
		}
		if f.Code > 0 {
			return fmt.Errorf("fault status: code %d: Mooncake error codes are negative", f.Code)
		}
	case FaultLoseKeys:
		if f.Segment == "" && f.Peer == "" {
			return fmt.Errorf("fault lose-keys: name the worker by segment or peer")
		}
	case FaultIgnorePings:
		if f.Client == "" && f.Peer == "" {
			return fmt.Errorf("fault ignore-pings: name the client by client or peer")
		}
	}
	return nil
}

// Immediate reports whether the fault acts once when set (restart, lose-keys, wipe) rather than shaping
// requests.
func (f Fault) Immediate() bool {
	return f.Kind == FaultRestart || f.Kind == FaultLoseKeys || f.Kind == FaultWipe
}

// Glob reports whether name matches pattern, where * matches any run of characters (slashes
// included: keys are paths like mooncake/rpc_meta/h:1) and ? any one character.
func Glob(pattern, name string) bool {
	// Iterative matching with one backtrack point: linear in practice, no recursion blow-up.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
