package lookup

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func TestDecode(t *testing.T) {
	h := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	cases := []struct {
		name   string
		source string // the vLLM file whose behaviour the row encodes
		frames [][]byte
		want   Request
		errHas string
	}{
		{name: "lookup with hashes", source: "mooncake/store/worker.py LookupKeyClient._lookup",
			frames: [][]byte{MsgLookup, u32(48), u16(32), append(h(1), h(2)...), {1}},
			want:   Request{Kind: KindLookup, NumTokens: 48, HashLen: 32, Hashes: [][]byte{h(1), h(2)}, ApplyEagle: true}},
		{name: "lookup without hashes sends hash_len 0", source: "mooncake/store/worker.py LookupKeyClient._lookup",
			frames: [][]byte{MsgLookup, u32(7), u16(0), {}, {0}},
			want:   Request{Kind: KindLookup, NumTokens: 7}},
		{name: "reset", source: "mooncake/store/protocol.py RESET_MSG",
			frames: [][]byte{MsgReset}, want: Request{Kind: KindReset}},
		{name: "unknown type", source: "mooncake/store/worker.py LookupKeyServer: unknown msg_type -> RESP_ERR",
			frames: [][]byte{[]byte("bogus")}, errHas: `unknown message type "bogus"`},
		{name: "no frames", source: "corrupt input", frames: nil, errHas: "no frames"},
		{name: "missing apply_eagle (pre-eagle client)", source: "mooncake/store/worker.py LookupKeyServer reads all_frames[4]",
			frames: [][]byte{MsgLookup, u32(1), u16(0), {}}, errHas: "4 frames, want 5"},
		{name: "short num_tokens", source: "protocol.py: num_tokens is 4 bytes",
			frames: [][]byte{MsgLookup, {0, 1}, u16(0), {}, {0}}, errHas: "num_tokens frame is 2 bytes"},
		{name: "short hash_len", source: "protocol.py: hash_len is 2 bytes",
			frames: [][]byte{MsgLookup, u32(1), {0}, {}, {0}}, errHas: "hash_len frame is 1 bytes"},
		{name: "ragged blob", source: "protocol.py: the server splits on hash_len",
			frames: [][]byte{MsgLookup, u32(1), u16(32), make([]byte, 33), {0}}, errHas: "not a multiple of hash_len 32"},
		{name: "blob without hash_len", source: "protocol.py: hash_len 0 when there are no hashes",
			frames: [][]byte{MsgLookup, u32(1), u16(0), {1}, {0}}, errHas: "hash_len 0 with 1 bytes"},
		{name: "oversized blob", source: "corrupt input",
			frames: [][]byte{MsgLookup, u32(1), u16(32), make([]byte, MaxHashBlob+32), {0}}, errHas: "exceed"},
		{name: "reset with payload", source: "protocol.py: reset has no payload frames",
			frames: [][]byte{MsgReset, {1}}, errHas: "2 frames, want 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.frames)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("Decode (%s) = %+v, %v; want error containing %q", tc.source, got, err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode (%s): %v", tc.source, err)
			}
			if got.Kind != tc.want.Kind || got.NumTokens != tc.want.NumTokens || got.HashLen != tc.want.HashLen ||
				got.ApplyEagle != tc.want.ApplyEagle || len(got.Hashes) != len(tc.want.Hashes) {
				t.Fatalf("Decode (%s) = %+v, want %+v", tc.source, got, tc.want)
			}
			for i := range got.Hashes {
				if !bytes.Equal(got.Hashes[i], tc.want.Hashes[i]) {
					t.Fatalf("hash %d = %x, want %x", i, got.Hashes[i], tc.want.Hashes[i])
				}
			}
		})
	}
}

func TestFramesDecodeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		hashLen := rapid.IntRange(1, 64).Draw(t, "hashLen")
		n := rapid.IntRange(0, 8).Draw(t, "n")
		req := Request{Kind: KindLookup, NumTokens: rapid.Uint32().Draw(t, "tokens"), ApplyEagle: rapid.Bool().Draw(t, "eagle")}
		for i := range n {
			req.Hashes = append(req.Hashes, rapid.SliceOfN(rapid.Byte(), hashLen, hashLen).Draw(t, "hash"+string(rune('0'+i))))
		}
		frames, err := req.Frames()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(frames)
		if err != nil {
			t.Fatalf("decode own frames: %v", err)
		}
		if got.NumTokens != req.NumTokens || got.ApplyEagle != req.ApplyEagle || len(got.Hashes) != n {
			t.Fatalf("round trip %+v -> %+v", req, got)
		}
		for i := range got.Hashes {
			if !bytes.Equal(got.Hashes[i], req.Hashes[i]) {
				t.Fatalf("hash %d: %x != %x", i, got.Hashes[i], req.Hashes[i])
			}
		}
		if n > 0 && got.Nonce() == "" {
			t.Fatal("a lookup with hashes has no nonce")
		}
	})
}

func TestFramesRejectsRaggedHashes(t *testing.T) {
	_, err := Request{Kind: KindLookup, Hashes: [][]byte{make([]byte, 32), make([]byte, 16)}}.Frames()
	if err == nil || !strings.Contains(err.Error(), "hash 1 is 16 bytes") {
		t.Fatalf("Frames of ragged hashes: %v", err)
	}
}

func TestDecodeHits(t *testing.T) {
	if n, err := DecodeHits([][]byte{EncodeHits(0xDEADBEEF)}); err != nil || n != 0xDEADBEEF {
		t.Fatalf("DecodeHits(EncodeHits) = %x, %v", n, err)
	}
	for _, bad := range [][][]byte{nil, {{0}}, {u32(1), u32(2)}} {
		if _, err := DecodeHits(bad); err == nil {
			t.Fatalf("DecodeHits(%v) accepted a malformed reply", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	sep := []byte{0xFF, 0xFE}
	join := func(fr ...[]byte) []byte { return bytes.Join(fr, sep) }
	f.Add(join(MsgLookup, u32(48), u16(32), make([]byte, 64), []byte{1}))
	f.Add(join(MsgReset))
	f.Add(join([]byte("bogus"), []byte{0}))
	f.Add(join(MsgLookup, u32(1), u16(3), make([]byte, 7), []byte{0}))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames := bytes.Split(data, sep)
		req, err := Decode(frames)
		if err != nil || req.Kind != KindLookup {
			return
		}
		again, err := req.Frames()
		if err != nil {
			t.Fatalf("re-encode decoded request: %v", err)
		}
		// A decoded lookup re-encodes to the same bytes, except that a set apply_eagle byte is
		// normalised to 1 (vLLM's server reads it with bool()) and a hash_len announced for no
		// hashes becomes 0 (what vLLM's client sends when it has none).
		for i := range 4 {
			if i == 2 && len(req.Hashes) == 0 {
				continue
			}
			if !bytes.Equal(again[i], frames[i]) {
				t.Fatalf("frame %d: %x re-encodes to %x", i, frames[i], again[i])
			}
		}
	})
}
