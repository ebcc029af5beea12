package api

import (
	"strings"
	"testing"
	"time"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*rpc_meta*", "mooncake/rpc_meta/h:1", true},
		{"mooncake/ram/*", "mooncake/ram/10.0.0.1:12300", true},
		{"mooncake/ram/*", "mooncake/rpc_meta/10.0.0.1:12300", false},
		{"*/h:1", "mooncake/c/ram/h:1", true},
		{"h:?", "h:1", true},
		{"h:?", "h:12", false},
		{"", "", true},
		{"*", "", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
	} {
		if got := Glob(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestParseFaultRoundTripsAndNamesErrors(t *testing.T) {
	f, err := ParseFault("kind=latency,plane=metadata,method=PUT,key=*ram*,latency=200ms,count=3,duration=1m")
	if err != nil {
		t.Fatal(err)
	}
	want := Fault{Kind: FaultLatency, Plane: PlaneMetadata, Method: "PUT", Key: "*ram*",
		Latency: Duration(200 * time.Millisecond), Count: 3, Duration: Duration(time.Minute)}
	if f != want {
		t.Errorf("parsed %+v, want %+v", f, want)
	}
	again, err := ParseFault(f.String())
	if err != nil || again != f {
		t.Errorf("round trip via %q: %+v %v", f.String(), again, err)
	}
	for _, tc := range []struct{ in, mention string }{
		{"", "empty"},
		{"kind", "not key=value"},
		{"kind=latency", "latency must be > 0"},
		{"kind=latency,latency=soon", "field latency"},
		{"kind=drop,count=x", "field count"},
		{"kind=drop,count=-1", "negative"},
		{"kind=drop,colour=red", `unknown field "colour"`},
		{"kind=status", "set status"},
		{"kind=status,status=99", "not an HTTP status"},
		{"kind=status,code=704", "negative"},
		{"kind=refuse,method=GET", "only plane and peer"},
		{"kind=lose-keys", "segment or peer"},
		{"kind=ignore-pings", "client or peer"},
		{"kind=drop,plane=test", "test endpoints take no faults"},
	} {
		if _, err := ParseFault(tc.in); err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("ParseFault(%q) = %v, want an error mentioning %q", tc.in, err, tc.mention)
		}
	}
}

func TestCodeNamesAreMooncakes(t *testing.T) {
	// mooncake-store/src/types.cpp toString(ErrorCode).
	for c, want := range map[Code]string{ObjectNotFound: "OBJECT_NOT_FOUND", ObjectAlreadyExists: "OBJECT_ALREADY_EXISTS",
		ObjectHasLease: "OBJECT_HAS_LEASE", NoAvailableHandle: "NO_AVAILABLE_HANDLE", Code(-12345): "UNKNOWN_ERROR"} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int32(c), got, want)
		}
	}
	if int32(ObjectNotFound) != -704 || int32(ObjectAlreadyExists) != -705 || int32(ObjectHasLease) != -706 || int32(NoAvailableHandle) != -200 {
		t.Error("error code values drifted from types.h")
	}
}

func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"kind=drop", "kind=latency,latency=1s,count=2", "kind=status,code=-704,plane=master",
		"kind=lose-keys,segment=h:1", "kind=refuse,peer=10.0.0.1,duration=3s", "kind=status,status=404,body=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fault, err := ParseFault(s)
		if err != nil {
			return
		}
		again, err := ParseFault(fault.String())
		if err != nil || again != fault {
			t.Fatalf("%q parsed to %+v, whose String %q parses to %+v (%v)", s, fault, fault.String(), again, err)
		}
	})
}
