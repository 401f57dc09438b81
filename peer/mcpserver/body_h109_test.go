package mcpserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// bigPing is a ping whose params hold an array of about size bytes of
// numbers: the SDK decodes a request several times over (about 0.2 to
// 0.5 s of CPU per MiB here, whatever the method), and answers a ping
// without looking at them.
func bigPing(size int) string {
	return `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"pad":[` + strings.Repeat("1,", size/2) + `1]}}`
}

// TestHTTPBodyPricedBySize: a request from beyond loopback took one token
// of its network's rate whatever its size, up to the 1 MiB body cap, and
// the SDK spends some 0.2 to 0.5 s of CPU decoding a MiB of JSON: one
// network within its rate (10 a second) had the node spend seconds of CPU
// a second, all networks together (200 a second) a hundred times its
// cores. A request now takes one token per 4 KiB of body
// (mcpserver.BodyUnit; a batch one per message when that is more), and
// one larger than a network's burst can pay is refused (413) before it is
// decoded. Loopback callers are not limited.
func TestHTTPBodyPricedBySize(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{RequestRate: 0.01, RequestBurst: 50})
	post := remoteSession(t, h, "203.0.113.9:4000")
	huge := bigPing(1<<20 - 200)
	code, _ := post(huge)
	big := bigPing(60 << 10)
	served, parsed := 0, 0
	start := time.Now()
	for range 20 {
		if code, _ := post(big); code == http.StatusOK {
			served++
			parsed += len(big)
		}
	}
	t.Logf("one ping of %d bytes from a network (burst 50): %d; then 20 of %d bytes: %d served, %d bytes decoded, %v",
		len(huge), code, len(big), served, parsed, time.Since(start).Round(time.Millisecond))
	if parsed > 50*mcpserver.BodyUnit {
		t.Errorf("one network had %d bytes of requests decoded within a burst of 50 requests, want at most %d (one request per %d bytes)",
			parsed, 50*mcpserver.BodyUnit, mcpserver.BodyUnit)
	}
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("a %d-byte request from beyond loopback: %d, want 413 (more than a burst of requests' worth)", len(huge), code)
	}
	// From loopback a request of any size up to the cap is served.
	lo := remoteSession(t, h, "")
	if code, body := lo(huge); code != http.StatusOK {
		t.Errorf("a %d-byte ping from loopback: %d %.200s", len(huge), code, body)
	}
}

// TestHTTPOversizeBatchRefusedUndecoded: a body over a burst's worth of
// units is refused 413 on its size, before the batch is decoded to count
// its messages (decoding first answered a big array of many messages 400
// "a JSON-RPC batch of N messages" after reading all of it).
func TestHTTPOversizeBatchRefusedUndecoded(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{RequestRate: 0.01, RequestBurst: 50})
	post := remoteSession(t, h, "203.0.113.9:4000")
	msg := `{"jsonrpc":"2.0","id":1,"method":"ping"},`
	batch := "[" + strings.Repeat(msg, (300<<10)/len(msg)) + msg[:len(msg)-1] + "]"
	if code, body := post(batch); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a %d-byte batch from beyond loopback: %d %.200s, want 413 before decoding", len(batch), code, body)
	}
}
