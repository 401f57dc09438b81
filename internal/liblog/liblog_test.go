package liblog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/gologshim"
)

// Every library's record reaches the installed handler as one JSON line
// with its subsystem, at the library's default level (error) and the
// handler's own.
func TestInstallRoutesLibraryLogs(t *testing.T) {
	t.Setenv("GOLOG_LOG_LEVEL", "")
	var buf bytes.Buffer
	Install(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))

	p2p := gologshim.Logger("liblog-test-p2p")
	p2p.Warn("below the library's level")
	p2p.Error("from go-libp2p", "k", 1)
	dht := golog.Logger("liblog-test-dht")
	dht.Warn("below the library's level")
	dht.Errorw("from go-log", "k", 2)
	ps := Logger("pubsub")
	ps.Info("below both levels")
	ps.Error("from gossipsub", "k", 3)

	Install(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError + 4}))
	p2p.Error("below the handler's level")

	want := map[string]string{"from go-libp2p": "liblog-test-p2p", "from go-log": "liblog-test-dht", "from gossipsub": "pubsub"}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, l)
		}
		msg, _ := m["msg"].(string)
		if sys, ok := want[msg]; !ok || m["logger"] != sys || m["level"] != "ERROR" || m["k"] == nil {
			t.Errorf("record %s: want one of %v with its logger, level ERROR and k", l, want)
		}
	}
}
