package liblog

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestBudgetLogger: a Budget's logger writes a message once, holds the
// same message back to DEBUG (counted in Suppressed), and cuts long text
// (message, string and error attributes) to MaxText bytes at a rune
// boundary.
func TestBudgetLogger(t *testing.T) {
	c := &countingHandler{level: slog.LevelDebug}
	var b Budget
	lg := b.Logger(c, "sdk")
	before := Suppressed()
	long := strings.Repeat("é", MaxText) // 2 bytes a rune
	lg.Warn("rejecting "+long, "v", long, "err", errors.New(long))
	lg.Warn("rejecting " + long)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.n[slog.LevelWarn]; len(n) != 1 {
		t.Fatalf("WARN lines %v, want one", n)
	}
	if got := c.n[slog.LevelDebug]; len(got) != 1 {
		t.Fatalf("DEBUG lines %v, want the second held back", got)
	}
	if d := Suppressed() - before; d != 1 {
		t.Errorf("Suppressed grew by %d, want 1", d)
	}
	first := c.attrs[0]
	for _, k := range []string{"msg", "v", "err"} {
		s := first[k].String()
		if len(s) > MaxText || !utf8.ValidString(s) || !strings.HasSuffix(s, "(cut)") {
			t.Errorf("%s: %d bytes, valid UTF-8 %v: %.40q…", k, len(s), utf8.ValidString(s), s)
		}
	}
}
