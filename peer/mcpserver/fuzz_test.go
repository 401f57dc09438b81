package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/spec"
)

// FuzzDecodeRecord feeds the text a verify_attestation caller (and a
// file given to acaptcha attestations verify) controls to DecodeRecord.
// No panic; what it returns is at most the input's size; and every
// envelope it returns reads back from each form it is documented to
// take: hex, base64, a JSON object with record or envelope_hex, the HTTP
// door's session, a list of one.
func FuzzDecodeRecord(f *testing.F) {
	for _, env := range testutil.VectorEnvelopes(f) {
		f.Add(hex.EncodeToString(env))
		f.Add(base64.StdEncoding.EncodeToString(env))
		f.Add(`{"envelope_base64":"` + base64.StdEncoding.EncodeToString(env) + `","key":"x"}`)
		f.Add(`[{"result":{"attestation":"` + base64.RawURLEncoding.EncodeToString(env) + `"}}]`)
	}
	f.Add("")
	f.Add("  \n")
	f.Add(`{"record":{"issuer":"x"},"attestation":"AAAA"}`)
	f.Add(`{"session":{"result":{"session":{"attestation":"00"}}}}`)
	f.Add(`{"record":"{\"record\":\"{\\\"record\\\":\\\"00\\\"}\"}"}`)
	f.Add(`[{},{}]`)
	f.Add(`[null]`)
	f.Add("0a 0b\n0c")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := mcpserver.DecodeRecord(s)
		if err != nil {
			return
		}
		if len(b) > len(s) {
			t.Fatalf("%d bytes decoded from %d characters", len(b), len(s))
		}
		if len(b) == 0 {
			return
		}
		forms := map[string]string{
			"hex":          hex.EncodeToString(b),
			"record":       `{"record":"` + base64.StdEncoding.EncodeToString(b) + `"}`,
			"envelope_hex": `{"envelope_hex":"` + hex.EncodeToString(b) + `"}`,
			"session":      `{"session_id":"s","result":{"attestation":"` + base64.StdEncoding.EncodeToString(b) + `"}}`,
			"list":         `[{"envelope_hex":"` + hex.EncodeToString(b) + `"}]`,
		}
		if b64 := base64.StdEncoding.EncodeToString(b); !isHex(b64) {
			// Base64 text made only of hex digits is read as hex
			// (documented: hex first).
			forms["base64"] = b64
		}
		for name, form := range forms {
			got, err := mcpserver.DecodeRecord(form)
			if err != nil || !bytes.Equal(got, b) {
				t.Fatalf("%s form of a decoded record reads back as %x, %v (want %x)", name, got, err, b)
			}
		}
	})
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// mcpVersion is the protocol version the fuzzed sessions initialize
// with.
const mcpVersion = "2025-06-18"

// mcpFuzzDoor is an MCP server of a running node behind the streamable
// HTTP handler, served in process.
type mcpFuzzDoor struct {
	h    *mcpserver.HTTPHandler
	next atomic.Uint32
}

func (d *mcpFuzzDoor) post(t *testing.T, ctx context.Context, remote, session, version, body string) (*httptest.ResponseRecorder, time.Duration) {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://mcp.test/mcp", strings.NewReader(body))
	req.RemoteAddr = remote
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	d.h.ServeHTTP(rec, req)
	return rec, time.Since(start)
}

// open initializes a session from loopback (the node's own agent).
func (d *mcpFuzzDoor) open(t *testing.T) string {
	rec, _ := d.post(t, context.Background(), "127.0.0.1:50000", "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}`)
	id := rec.Header().Get("Mcp-Session-Id")
	if rec.Code != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %q", rec.Code, rec.Body.String())
	}
	if rec, _ := d.post(t, context.Background(), "127.0.0.1:50000", id, mcpVersion, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); rec.Code >= 300 {
		t.Fatalf("initialized: %d %q", rec.Code, rec.Body.String())
	}
	return id
}

func (d *mcpFuzzDoor) close(id string) {
	req := httptest.NewRequest(http.MethodDelete, "http://mcp.test/mcp", nil)
	req.RemoteAddr = "127.0.0.1:50000"
	req.Header.Set("Mcp-Session-Id", id)
	d.h.ServeHTTP(httptest.NewRecorder(), req)
}

// FuzzMCPRequest sends what an MCP client over HTTP controls (the body
// of a POST: JSON-RPC requests, notifications and batches, tool calls
// with any arguments) to a session of the node's MCP server, from a
// caller beyond loopback (a network of its own per input, so that the
// rate limits answer only for what one input does) or from loopback.
// No panic, no internal server error, an answer within the time a
// request may take (tools that wait are asked to wait at most a
// second); the session stays usable unless the input closed it.
// attest_peer is left out: it dials the address it is given.
func FuzzMCPRequest(f *testing.F) {
	sets, err := spec.Examples()
	if err != nil {
		f.Fatal(err)
	}
	n := testnode.New(f, testnode.Options{Config: peer.Config{Logger: slog.New(slog.DiscardHandler)}, Sets: sets})
	srv, err := mcpserver.New(mcpserver.Config{Node: n, Version: "fuzz", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Close)
	h, err := mcpserver.NewHTTPHandler(srv, mcpserver.HTTPConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	d := &mcpFuzzDoor{h: h}
	f.Cleanup(d.h.Close)
	tool := func(name string, args any) string {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
		return string(b)
	}
	for _, env := range testutil.VectorEnvelopes(f)[:4] {
		f.Add(tool("verify_attestation", map[string]any{"record": hex.EncodeToString(env), "any_verdict": true}), true, true)
		f.Add(tool("verify_attestation", map[string]any{"record": base64.StdEncoding.EncodeToString(env), "require_source": "hybrid", "subject": n.ID().String()}), false, true)
	}
	f.Add(tool("verify_attestation", map[string]any{"record": strings.Repeat("A", 70000)}), true, true)
	f.Add(tool("list_attestations", map[string]any{"limit": 5, "direction": "issued"}), true, true)
	f.Add(tool("list_attestations", map[string]any{"limit": -1, "peer": "x"}), false, true)
	f.Add(tool("list_peers", map[string]any{}), true, true)
	f.Add(tool("list_peers", map[string]any{"cursor": "zz", "limit": 1e9}), true, true)
	f.Add(tool("attest_status", map[string]any{"job_id": "nope", "wait_ms": 100}), true, true)
	f.Add(tool("next_challenge", map[string]any{"wait_ms": 10}), true, true)
	f.Add(tool("answer_challenge", map[string]any{"id": "x", "answer": "KX-7"}), false, true)
	f.Add(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, true, true)
	f.Add(`[{"jsonrpc":"2.0","id":4,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}]`, true, true)
	f.Add(`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{}}`, true, true)
	f.Add(`{"jsonrpc":"2.0","id":null,"method":"ping"}`, false, true)
	f.Add(`[]`, true, true)
	f.Add(`[{"jsonrpc":"2.0","id":6,"method":"ping"},{"jsonrpc":"2.0","id":7,"method":"tools/list"}]`, true, false)
	f.Add(`{`, true, true)
	f.Fuzz(func(t *testing.T, body string, remote, header bool) {
		if strings.Contains(body, "attest_peer") {
			t.Skip("attest_peer dials the network")
		}
		id := d.open(t)
		defer d.close(id)
		addr := "127.0.0.1:50001"
		if remote {
			k := d.next.Add(1)
			addr = fmt.Sprintf("11.%d.%d.1:40000", byte(k>>8), byte(k))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		version := ""
		if header {
			// Without the header the SDK takes a JSON-RPC batch.
			version = mcpVersion
		}
		rec, took := d.post(t, ctx, addr, id, version, body)
		if took > 8*time.Second {
			t.Fatalf("the request took %s", took)
		}
		switch rec.Code {
		case http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed,
			http.StatusNotAcceptable, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusTooManyRequests:
		default:
			t.Fatalf("status %d: %.300q", rec.Code, rec.Body.String())
		}
		// A caller beyond loopback has at most a network's burst of
		// calls run by one request (a batch counts each message).
		if ran := strings.Count(rec.Body.String(), `"jsonrpc":"2.0"`); remote && ran > mcpserver.DefaultHTTPRequestBurst {
			t.Fatalf("one request from beyond loopback ran %d calls (burst %d): %d", ran, mcpserver.DefaultHTTPRequestBurst, rec.Code)
		}
		// The session answers a request after it (unless the input
		// ended it, which a client may).
		rec, _ = d.post(t, context.Background(), "127.0.0.1:50000", id, mcpVersion, `{"jsonrpc":"2.0","id":99,"method":"ping"}`)
		if rec.Code != http.StatusOK && rec.Code != http.StatusNotFound {
			t.Fatalf("ping after the input: %d %.300q", rec.Code, rec.Body.String())
		}
	})
}
