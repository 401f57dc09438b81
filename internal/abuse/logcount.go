package abuse

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/acaptcha/acaptcha/skill"
)

// logCounter counts what a node logs: records, warnings, bytes (as the
// text handler would write them) and, per peer, the verifier sessions that
// ended in a signed record. A verifier signs exactly when its session ends
// with a verdict other than inconclusive (protocol.NewAttestation), and
// logs "verification finished" with the reason for every session.
type logCounter struct {
	records, warns atomic.Int64
	bytes          atomic.Int64
	mu             sync.Mutex
	signed         map[string]int
	finished       int
}

// msgFinished is the verifier's log message at the end of every session
// (protocol/verifier.go); the harness test fails if it stops being seen.
const msgFinished = "verification finished"

func newLogCounter() *logCounter { return &logCounter{signed: map[string]int{}} }

// Write counts the bytes the text handler renders.
func (c *logCounter) Write(p []byte) (int, error) {
	c.bytes.Add(int64(len(p)))
	return len(p), nil
}

// handler returns a slog handler that counts into c; when echo is not nil,
// records at or above echoLevel are also written there.
func (c *logCounter) handler(echo io.Writer, echoLevel slog.Level) slog.Handler {
	h := &countHandler{c: c, text: slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelInfo})}
	if echo != nil {
		h.echo = slog.NewTextHandler(echo, &slog.HandlerOptions{Level: echoLevel})
	}
	return h
}

// signatures returns the signed sessions counted for peer id.
func (c *logCounter) signatures(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signed[id]
}

func (c *logCounter) sessionsFinished() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finished
}

type countHandler struct {
	c     *logCounter
	text  slog.Handler
	echo  slog.Handler
	attrs []slog.Attr
}

func (h *countHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *countHandler) Handle(ctx context.Context, r slog.Record) error {
	h.c.records.Add(1)
	if r.Level >= slog.LevelWarn {
		h.c.warns.Add(1)
	}
	if r.Message == msgFinished {
		reason, peer := "", ""
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "reason":
				reason = a.Value.String()
			case "peer":
				peer = a.Value.String()
			}
			return true
		})
		for _, a := range h.attrs {
			if a.Key == "peer" && peer == "" {
				peer = a.Value.String()
			}
		}
		h.c.mu.Lock()
		h.c.finished++
		if reason != string(skill.ReasonInconclusive) {
			h.c.signed[peer]++
		}
		h.c.mu.Unlock()
	}
	if h.echo != nil && h.echo.Enabled(ctx, r.Level) {
		_ = h.echo.Handle(ctx, r)
	}
	return h.text.Handle(ctx, r)
}

func (h *countHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	n.text = h.text.WithAttrs(as)
	if h.echo != nil {
		n.echo = h.echo.WithAttrs(as)
	}
	return &n
}

func (h *countHandler) WithGroup(name string) slog.Handler {
	n := *h
	n.text = h.text.WithGroup(name)
	if h.echo != nil {
		n.echo = h.echo.WithGroup(name)
	}
	return &n
}
