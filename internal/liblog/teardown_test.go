package liblog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A Teardown passes records as they are until it starts (warnings during
// a run are kept), then writes them at DEBUG, and only where DEBUG is
// enabled.
func TestTeardownDemotes(t *testing.T) {
	var warnOut, debugOut bytes.Buffer
	var td Teardown
	warn := slog.New(td.Handler(slog.NewTextHandler(&warnOut, &slog.HandlerOptions{Level: slog.LevelWarn}))).With("node", 1)
	debug := slog.New(td.Handler(slog.NewTextHandler(&debugOut, &slog.HandlerOptions{Level: slog.LevelDebug})))
	warn.Warn("during the run")
	td.Start()
	warn.Warn("at teardown")
	debug.Warn("at teardown")
	if s := warnOut.String(); !strings.Contains(s, "level=WARN msg=\"during the run\" node=1") || strings.Contains(s, "at teardown") {
		t.Fatalf("at warn level:\n%s", s)
	}
	if s := debugOut.String(); !strings.Contains(s, "level=DEBUG msg=\"at teardown\" level_at_teardown=WARN") {
		t.Fatalf("at debug level:\n%s", s)
	}
}
