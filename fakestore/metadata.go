package fakestore

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/widetp/widetp/fakestore/api"
)

// The metadata plane imitates three real HTTP metadata servers, byte for byte in status, body and
// Content-Type (see the Flavor constants for the files). Their bodies:
const (
	bodyMissingKeyCPP    = "Missing key parameter"    // http_metadata_server.cpp
	bodyMissingKeyPython = "metadata key is required" // http_metadata_server.py
	bodyNotFound         = "metadata not found"
	bodyUpdated          = "metadata updated"
	bodyUnchanged        = "metadata unchanged"
	bodyDeleted          = "metadata deleted"
	bodyDuplicateRPCMeta = "Duplicate rpc_meta key not allowed"
	bodyMethodNotAllowed = "Method not allowed"             // python: any method but GET/PUT/DELETE
	bodyKeyBudget        = "metadata key budget exhausted"  // python: MC_METADATA_MAX_KEYS
	bodySizeBudget       = "metadata size budget exhausted" // python: MC_METADATA_MAX_TOTAL_BYTES
	bodyInvalidRequest   = "invalid request"                // go example: unreadable request
	bodyCinatra404       = "404 Not Found"                  // coro_http: default_status_content(404)
	bodyAiohttp404       = "404: Not Found"                 // aiohttp's HTTPNotFound
	bodyGin404           = "404 page not found"             // gin's default 404
	bodyHealthOK         = "OK"                             // cpp: GET /health
)

// Content types the real servers send.
const (
	ctJSON         = "application/json"                // cpp GET hit; python GET hit (bytes body)
	ctJSONUTF8     = "application/json; charset=utf-8" // python text answers (aiohttp adds charset); go (gin)
	ctTextUTF8     = "text/plain; charset=utf-8"       // aiohttp's own errors
	ctTextPlain    = "text/plain"                      // gin's 404
	ctPrometheus   = "text/plain; version=0.0.4"       // master admin text endpoints
	ctNone         = ""                                // cinatra sends no Content-Type unless told
	cinatraServer  = "cinatra"
	pythonMaxKeys  = 65536   // MC_METADATA_MAX_KEYS default
	pythonMaxBytes = 1 << 30 // MC_METADATA_MAX_TOTAL_BYTES default
)

// metaStore is the metadata server's memory: key -> raw body.
type metaStore struct {
	values map[string][]byte
	bytes  int64 // total value bytes, for the python flavor's budget
}

func newMetaStore() *metaStore { return &metaStore{values: map[string][]byte{}} }

// writeText answers status with body; contentType "" sends no Content-Type at all (cinatra).
func writeText(x *exchange, status int, contentType, body string) {
	h := x.Header()
	if contentType == ctNone {
		h["Content-Type"] = nil // stops net/http from sniffing one
	} else if v, ok := headerValues[contentType]; ok {
		h["Content-Type"] = v // shared, never mutated: saves an allocation per answer
	} else {
		h.Set("Content-Type", contentType)
	}
	x.WriteHeader(status)
	_, _ = io.WriteString(x, body)
}

// headerValues are the header values the planes send, allocated once.
var headerValues = map[string][]string{}

func init() {
	for _, v := range []string{ctJSON, ctJSONUTF8, ctTextUTF8, ctTextPlain, ctPrometheus, cinatraServer} {
		headerValues[v] = []string{v}
	}
}

// metadataKey reads ?key= the way the flavor does; ok is false when the query's percent-encoding
// is broken (answered 400 by the caller, where the real servers would use a garbled key).
func metadataKey(r *http.Request, flavor Flavor) (key string, ok bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", false
	}
	key = q.Get("key")
	if flavor == FlavorPython {
		key = strings.TrimSpace(key) // request.query.get("key", "").strip()
	}
	return key, true
}

func (s *Server) serveMetadata(x *exchange, r *http.Request, body []byte) {
	switch s.cfg.Flavor {
	case FlavorPython:
		s.metadataPython(x, r, body)
	case FlavorGo:
		s.metadataGo(x, r, body)
	default:
		s.metadataCPP(x, r, body)
	}
}

func (s *Server) metadataCPP(x *exchange, r *http.Request, body []byte) {
	x.Header()["Server"] = headerValues[cinatraServer]
	// coro_http routes on "METHOD path": unregistered pairs get 404 with the status line's text.
	if r.URL.Path == "/health" && r.Method == http.MethodGet {
		writeText(x, http.StatusOK, ctNone, bodyHealthOK)
		return
	}
	if r.URL.Path != "/metadata" || (r.Method != http.MethodGet && r.Method != http.MethodPut && r.Method != http.MethodDelete) {
		writeText(x, http.StatusNotFound, ctNone, bodyCinatra404)
		return
	}
	key, ok := x.key, x.keyOK
	if !ok || key == "" {
		writeText(x, http.StatusBadRequest, ctNone, bodyMissingKeyCPP)
		return
	}
	switch r.Method {
	case http.MethodGet:
		if v, found := s.metaGet(key); found {
			writeText(x, http.StatusOK, ctJSON, string(v))
			return
		}
		writeText(x, http.StatusNotFound, ctNone, bodyNotFound)
	case http.MethodPut:
		switch s.metaPut(key, body, x.peer, rpcMetaSameBodyOK, 0, 0) {
		case putUnchanged:
			writeText(x, http.StatusOK, ctNone, bodyUnchanged)
		case putRejected:
			writeText(x, http.StatusBadRequest, ctNone, bodyDuplicateRPCMeta)
		default:
			writeText(x, http.StatusOK, ctNone, bodyUpdated)
		}
	case http.MethodDelete:
		if s.metaDelete(key, x.peer) {
			writeText(x, http.StatusOK, ctNone, bodyDeleted)
			return
		}
		writeText(x, http.StatusNotFound, ctNone, bodyNotFound)
	}
}

func (s *Server) metadataPython(x *exchange, r *http.Request, body []byte) {
	if r.URL.Path != "/metadata" {
		writeText(x, http.StatusNotFound, ctTextUTF8, bodyAiohttp404)
		return
	}
	// The route takes every method; the key is checked before the method.
	key, ok := x.key, x.keyOK
	if !ok || key == "" {
		writeText(x, http.StatusBadRequest, ctJSONUTF8, bodyMissingKeyPython)
		return
	}
	switch r.Method {
	case http.MethodGet:
		if v, found := s.metaGet(key); found {
			writeText(x, http.StatusOK, ctJSON, string(v))
			return
		}
		writeText(x, http.StatusNotFound, ctJSONUTF8, bodyNotFound)
	case http.MethodPut:
		switch s.metaPut(key, body, x.peer, rpcMetaSameBodyOK, pythonMaxKeys, pythonMaxBytes) {
		case putUnchanged:
			writeText(x, http.StatusOK, ctJSONUTF8, bodyUnchanged)
		case putRejected:
			writeText(x, http.StatusBadRequest, ctJSONUTF8, bodyDuplicateRPCMeta)
		case putKeyBudget:
			writeText(x, http.StatusInsufficientStorage, ctJSONUTF8, bodyKeyBudget)
		case putSizeBudget:
			writeText(x, http.StatusInsufficientStorage, ctJSONUTF8, bodySizeBudget)
		default:
			writeText(x, http.StatusOK, ctJSONUTF8, bodyUpdated)
		}
	case http.MethodDelete:
		if s.metaDelete(key, x.peer) {
			writeText(x, http.StatusOK, ctJSONUTF8, bodyDeleted)
			return
		}
		writeText(x, http.StatusNotFound, ctJSONUTF8, bodyNotFound)
	default:
		writeText(x, http.StatusMethodNotAllowed, ctJSONUTF8, bodyMethodNotAllowed)
	}
}

func (s *Server) metadataGo(x *exchange, r *http.Request, body []byte) {
	routed := r.Method == http.MethodGet || r.Method == http.MethodPut || r.Method == http.MethodDelete
	if r.URL.Path == "/metadata/" && routed {
		// gin's RedirectTrailingSlash: 301 for GET, 307 for the other routed methods.
		code := http.StatusMovedPermanently
		if r.Method != http.MethodGet {
			code = http.StatusTemporaryRedirect
		}
		u := *r.URL
		u.Path = "/metadata"
		http.Redirect(x, r, u.String(), code)
		return
	}
	if r.URL.Path != "/metadata" || !routed {
		writeText(x, http.StatusNotFound, ctTextPlain, bodyGin404)
		return
	}
	key, ok := x.key, x.keyOK
	if !ok {
		writeText(x, http.StatusBadRequest, ctJSONUTF8, bodyInvalidRequest)
		return
	}
	// The go example uses the key as given, even empty.
	switch r.Method {
	case http.MethodGet:
		if v, found := s.metaGet(key); found {
			writeText(x, http.StatusOK, ctJSONUTF8, string(v))
			return
		}
		writeText(x, http.StatusNotFound, ctJSONUTF8, bodyNotFound)
	case http.MethodPut:
		s.metaPut(key, body, x.peer, rpcMetaOverwrite, 0, 0)
		writeText(x, http.StatusOK, ctJSONUTF8, bodyUpdated)
	case http.MethodDelete:
		s.metaDelete(key, x.peer)
		writeText(x, http.StatusOK, ctJSONUTF8, bodyDeleted)
	}
}

// tooLargeMetadata answers a body over the cap, in the flavor's words.
func (s *Server) tooLargeMetadata(x *exchange, r *http.Request, read int64) {
	switch s.cfg.Flavor {
	case FlavorPython:
		actual := r.ContentLength
		if actual < 0 {
			actual = read
		}
		writeText(x, http.StatusRequestEntityTooLarge, ctTextUTF8,
			fmt.Sprintf("Maximum request body size %d exceeded, actual body size %d", s.cfg.MaxBody, actual))
	case FlavorGo:
		writeText(x, http.StatusRequestEntityTooLarge, ctTextPlain, "Request Entity Too Large")
	default:
		x.Header()["Server"] = headerValues[cinatraServer]
		writeText(x, http.StatusRequestEntityTooLarge, ctNone, "Request Entity Too Large")
	}
}

// forcedMetadata answers a status fault with the body the flavor sends for that status.
func (s *Server) forcedMetadata(x *exchange, r *http.Request, status int, body string) {
	ct := ctJSONUTF8
	switch s.cfg.Flavor {
	case FlavorCPP:
		ct = ctNone
		x.Header()["Server"] = headerValues[cinatraServer]
	}
	if body == "" {
		switch status {
		case http.StatusOK:
			switch r.Method {
			case http.MethodPut:
				body = bodyUpdated
			case http.MethodDelete:
				body = bodyDeleted
			default:
				body = "{}"
			}
		case http.StatusBadRequest:
			body = bodyDuplicateRPCMeta
			if r.Method != http.MethodPut {
				body = map[Flavor]string{FlavorCPP: bodyMissingKeyCPP, FlavorPython: bodyMissingKeyPython, FlavorGo: bodyInvalidRequest}[s.cfg.Flavor]
			}
		case http.StatusNotFound:
			body = bodyNotFound
		case http.StatusMethodNotAllowed:
			body = bodyMethodNotAllowed
		case http.StatusInsufficientStorage:
			body = bodyKeyBudget
		default:
			body = http.StatusText(status)
			if s.cfg.Flavor == FlavorCPP {
				body = fmt.Sprintf("%d %s", status, body) // coro_http's default_status_content
			}
		}
	}
	writeText(x, status, ct, body)
}

type putOutcome int

const (
	putUpdated putOutcome = iota
	putUnchanged
	putRejected
	putKeyBudget
	putSizeBudget
)

type rpcMetaRule int

const (
	// rpcMetaSameBodyOK: an existing rpc_meta key takes the same body (200 unchanged) and refuses
	// another (400) — the cpp server since Mooncake #2311 and the python wheel that mirrors it.
	rpcMetaSameBodyOK rpcMetaRule = iota
	// rpcMetaOverwrite: every PUT overwrites (the go example).
	rpcMetaOverwrite
)

func (s *Server) metaGet(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.meta.values[key]
	return v, ok
}

// metaPut stores body under key, applying the flavor's rpc_meta rule and budgets (0 = none), and
// records the registration and any duplicate-name event.
func (s *Server) metaPut(key string, body []byte, peer string, rule rpcMetaRule, maxKeys int, maxBytes int64) putOutcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	kind, name := classifyKey(key)
	old, exists := s.meta.values[key]
	if exists && strings.Contains(key, "rpc_meta") {
		holder := ""
		if reg, ok := s.reg.regs[regKey{kind, key}]; ok {
			holder = reg.Writer
		}
		d := api.Duplicate{Time: now, Kind: kindRPCMeta, Name: name, Key: key, Holder: holder, Peer: peer}
		same := bytes.Equal(old, body)
		switch {
		case rule == rpcMetaOverwrite:
			d.Action = "accepted"
			if same {
				d.Action = "unchanged"
			}
		case same:
			d.Action = "unchanged"
			s.reg.duplicates = append(s.reg.duplicates, d)
			s.reg.note(kind, key, name, peer, "put", "unchanged", true, now)
			return putUnchanged
		default:
			d.Action = "rejected"
			s.reg.duplicates = append(s.reg.duplicates, d)
			s.reg.note(kind, key, name, peer, "put", "rejected-duplicate", true, now)
			return putRejected
		}
		s.reg.duplicates = append(s.reg.duplicates, d)
	}
	if !exists && maxKeys > 0 && len(s.meta.values) >= maxKeys {
		s.reg.note(kind, key, name, peer, "put", "key-budget-exhausted", false, now)
		return putKeyBudget
	}
	total := s.meta.bytes - int64(len(old)) + int64(len(body))
	if maxBytes > 0 && total > maxBytes {
		s.reg.note(kind, key, name, peer, "put", "size-budget-exhausted", exists, now)
		return putSizeBudget
	}
	s.meta.values[key] = body // readBody's own buffer: nothing else holds it
	s.meta.bytes = total
	s.reg.write(kind, key, name, peer, "put", "updated", now)
	return putUpdated
}

func (s *Server) metaDelete(key, peer string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	kind, name := classifyKey(key)
	old, ok := s.meta.values[key]
	if !ok {
		s.reg.noteIfKnown(kind, key, peer, "delete", "not-found", false, now)
		return false
	}
	delete(s.meta.values, key)
	s.meta.bytes -= int64(len(old))
	s.reg.note(kind, key, name, peer, "delete", "deleted", false, now)
	return true
}

// deleteSegmentKeysLocked deletes the rpc_meta and ram keys of a segment name (any prefix), as
// the master's metadata cleanup does for an expired or lost segment.
func (s *Server) deleteSegmentKeysLocked(name, reason string, now time.Time) []string {
	var gone []string
	for key, v := range s.meta.values {
		kind, n := classifyKey(key)
		if n != name || (kind != kindRPCMeta && kind != kindRAM) {
			continue
		}
		delete(s.meta.values, key)
		s.meta.bytes -= int64(len(v))
		s.reg.note(kind, key, name, "", reason, "deleted", false, now)
		gone = append(gone, key)
	}
	return gone
}
