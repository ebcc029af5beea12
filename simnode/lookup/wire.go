// Package lookup is the Mooncake store connector's lookup channel as vLLM runs it: a ZMQ REP server
// on the replica's rank-0 worker and a REQ client in each engine core's scheduler, over an ipc://
// path that both sides compute. It speaks vLLM's wire format byte for byte (see wire.go) over real
// libzmq, so that a second binder of a path silently takes the path over exactly as it does in vLLM.
package lookup

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Wire format of the lookup channel, from vLLM's
// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/protocol.py and the LookupKeyServer /
// LookupKeyClient pair in .../mooncake/store/worker.py:
//
//	lookup request: ["lookup", u32 BE num_tokens, u16 BE hash_len, hashes concatenated, u8 apply_eagle]
//	lookup reply:   [u32 BE hit token count]
//	reset request:  ["reset"]  -> [RespOK] or [RespErr]
//	anything else:             -> [RespErr]
var (
	// MsgLookup is frame 0 of a lookup request (protocol.py LOOKUP_MSG).
	MsgLookup = []byte("lookup")
	// MsgReset is frame 0 of a reset request (protocol.py RESET_MSG).
	MsgReset = []byte("reset")
	// RespOK answers a reset that succeeded (protocol.py RESP_OK).
	RespOK = []byte{0x01}
	// RespErr answers a failed reset and any request the server does not understand (RESP_ERR).
	RespErr = []byte{0x00}
)

// MaxHashBlob bounds the concatenated block hashes of one request. A 1M-token prompt in 16-token
// blocks with 32-byte hashes is 2 MiB; anything far beyond that is corrupt or hostile, and the server
// answers it with RespErr instead of allocating for it.
const MaxHashBlob = 16 << 20

// Kind says what a request asks for.
type Kind int

const (
	// KindLookup asks how many prefix tokens are cached.
	KindLookup Kind = iota + 1
	// KindReset asks the server to wipe the store.
	KindReset
)

// Request is a decoded request of the lookup channel.
type Request struct {
	Kind Kind
	// NumTokens is the prompt length the scheduler asks about (lookups only).
	NumTokens uint32
	// HashLen is the byte length of each block hash; 0 when there are none.
	HashLen uint16
	// Hashes are the block hashes, each HashLen bytes.
	Hashes [][]byte
	// ApplyEagle is the apply_eagle flag of the lookup.
	ApplyEagle bool
}

// Nonce is how a lookup names itself to the server that answers it: the hex of its first block hash
// ("" when it carries none). vLLM's reply (a bare hit count) cannot name the server, so servers record
// the nonces they answered and report.ResolveLookups joins the two sides.
func (r Request) Nonce() string {
	if len(r.Hashes) == 0 {
		return ""
	}
	return hex.EncodeToString(r.Hashes[0])
}

// Frames encodes a lookup request the way vLLM's LookupKeyClient._lookup sends it. Every hash must
// have the length of the first one (vLLM's block hashes are fixed-size).
func (r Request) Frames() ([][]byte, error) {
	switch r.Kind {
	case KindReset:
		return [][]byte{MsgReset}, nil
	case KindLookup:
	default:
		return nil, fmt.Errorf("encode lookup request: unknown kind %d", r.Kind)
	}
	hashLen := 0
	if len(r.Hashes) > 0 {
		hashLen = len(r.Hashes[0])
	}
	if hashLen > 0xFFFF {
		return nil, fmt.Errorf("encode lookup request: hash length %d does not fit the u16 frame", hashLen)
	}
	blob := make([]byte, 0, hashLen*len(r.Hashes))
	for i, h := range r.Hashes {
		if len(h) != hashLen {
			return nil, fmt.Errorf("encode lookup request: hash %d is %d bytes, hash 0 is %d", i, len(h), hashLen)
		}
		blob = append(blob, h...)
	}
	if len(blob) > MaxHashBlob {
		return nil, fmt.Errorf("encode lookup request: %d bytes of hashes exceed %d", len(blob), MaxHashBlob)
	}
	eagle := byte(0)
	if r.ApplyEagle {
		eagle = 1
	}
	return [][]byte{
		MsgLookup,
		binary.BigEndian.AppendUint32(nil, r.NumTokens),
		binary.BigEndian.AppendUint16(nil, uint16(hashLen)),
		blob,
		{eagle},
	}, nil
}

// Decode parses the frames of one request. It is strict where vLLM's server would raise (and, in
// vLLM, kill its serving thread): every malformed request is an error, which the server answers with
// RespErr while it keeps serving.
func Decode(frames [][]byte) (Request, error) {
	if len(frames) == 0 {
		return Request{}, fmt.Errorf("decode lookup request: no frames")
	}
	switch string(frames[0]) {
	case string(MsgReset):
		if len(frames) != 1 {
			return Request{}, fmt.Errorf("decode reset request: %d frames, want 1", len(frames))
		}
		return Request{Kind: KindReset}, nil
	case string(MsgLookup):
	default:
		return Request{}, fmt.Errorf("decode lookup request: unknown message type %q", truncate(frames[0]))
	}
	if len(frames) != 5 {
		return Request{}, fmt.Errorf("decode lookup request: %d frames, want 5", len(frames))
	}
	if len(frames[1]) != 4 {
		return Request{}, fmt.Errorf("decode lookup request: num_tokens frame is %d bytes, want 4", len(frames[1]))
	}
	if len(frames[2]) != 2 {
		return Request{}, fmt.Errorf("decode lookup request: hash_len frame is %d bytes, want 2", len(frames[2]))
	}
	if len(frames[4]) != 1 {
		return Request{}, fmt.Errorf("decode lookup request: apply_eagle frame is %d bytes, want 1", len(frames[4]))
	}
	req := Request{
		Kind:       KindLookup,
		NumTokens:  binary.BigEndian.Uint32(frames[1]),
		HashLen:    binary.BigEndian.Uint16(frames[2]),
		ApplyEagle: frames[4][0] != 0,
	}
	blob := frames[3]
	if len(blob) > MaxHashBlob {
		return Request{}, fmt.Errorf("decode lookup request: %d bytes of hashes exceed %d", len(blob), MaxHashBlob)
	}
	switch {
	case req.HashLen == 0 && len(blob) != 0:
		return Request{}, fmt.Errorf("decode lookup request: hash_len 0 with %d bytes of hashes", len(blob))
	case req.HashLen != 0 && len(blob)%int(req.HashLen) != 0:
		return Request{}, fmt.Errorf("decode lookup request: %d bytes of hashes are not a multiple of hash_len %d", len(blob), req.HashLen)
	}
	for off := 0; req.HashLen != 0 && off < len(blob); off += int(req.HashLen) {
		req.Hashes = append(req.Hashes, blob[off:off+int(req.HashLen)])
	}
	return req, nil
}

// EncodeHits is the reply to a lookup: the hit token count, u32 big-endian.
func EncodeHits(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// DecodeHits parses a lookup reply.
func DecodeHits(frames [][]byte) (uint32, error) {
	if len(frames) != 1 || len(frames[0]) != 4 {
		sizes := make([]int, len(frames))
		for i, f := range frames {
			sizes[i] = len(f)
		}
		return 0, fmt.Errorf("decode lookup reply: frame sizes %v, want one 4-byte frame", sizes)
	}
	return binary.BigEndian.Uint32(frames[0]), nil
}

// truncate keeps error messages readable when a peer sends a large garbage frame.
func truncate(b []byte) []byte {
	const max = 32
	if len(b) > max {
		return b[:max]
	}
	return b
}
