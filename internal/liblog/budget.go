package liblog

import (
	"context"
	"log/slog"
	"unicode/utf8"
)

// A library that takes its logger from its caller, rather than from a
// process-wide registry as go-libp2p's and the DHT's do, writes whatever
// its caller gives it: the MCP SDK (mcp.ServerOptions.Logger and
// StreamableHTTPOptions.Logger) logs an INFO line per session opened and
// closed, an ERROR per request sent out of order, and a WARN per request
// naming a protocol version its stateful server refuses, that version (an
// HTTP header, up to its server's header cap) quoted in the message. A
// Budget gives such a library a logger whose lines pass a limiter of their
// own, with the bounds of the libraries' lines (limit.go), and whose text
// is cut to MaxText bytes; held-back lines go to DEBUG and count in
// Suppressed, as the others do.

// MaxText is the most bytes of a message, or of a string attribute, a
// Budget's logger writes; the rest is cut (a remote caller may put a
// header's worth of text into an SDK's message).
const MaxText = 512

// Budget is the line budget of one library's loggers (Logger); its zero
// value is ready. It is separate from the budget of the libraries routed
// by Install, so that one library's flood does not hold back another's
// lines.
type Budget struct {
	lim limiter
}

// Logger returns a logger that writes to h, its records carrying the
// attribute logger=system, through b: a record at INFO or above is
// written at most once a minute per message (and peer, as for the other
// libraries), and all of them together in a burst of 20, then one a
// second; a record held back goes to h at DEBUG (level_held_back) and
// counts in Suppressed. Messages and string attributes are cut to
// MaxText bytes.
func (b *Budget) Logger(h slog.Handler, system string) *slog.Logger {
	return slog.New(budgetHandler{b: b, system: system, next: h.WithAttrs([]slog.Attr{slog.String("logger", system)})})
}

type budgetHandler struct {
	b      *Budget
	system string
	next   slog.Handler
}

func (h budgetHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h budgetHandler) Handle(ctx context.Context, r slog.Record) error {
	r = cutRecord(r)
	r, held := limitWith(&h.b.lim, h.system, r)
	if held && !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h budgetHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	cut := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		cut[i] = cutAttr(a)
	}
	h.next = h.next.WithAttrs(cut)
	return h
}

func (h budgetHandler) WithGroup(name string) slog.Handler {
	h.next = h.next.WithGroup(name)
	return h
}

// cutRecord returns r with its message and its attributes' text cut to
// MaxText bytes.
func cutRecord(r slog.Record) slog.Record {
	out := slog.NewRecord(r.Time, r.Level, cutText(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool { out.AddAttrs(cutAttr(a)); return true })
	return out
}

// cutAttr cuts an attribute's text: a string's, an error's or another
// value's as written (a group's members, recursively).
func cutAttr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindString, slog.KindAny:
		if s := a.Value.String(); len(s) > MaxText {
			return slog.String(a.Key, cutText(s))
		}
	case slog.KindGroup:
		g := a.Value.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = cutAttr(x)
		}
		return slog.Group(a.Key, out...)
	}
	return a
}

// cutText cuts s to at most MaxText bytes at a rune boundary, saying so.
func cutText(s string) string {
	if len(s) <= MaxText {
		return s
	}
	const mark = "…(cut)"
	n := MaxText - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}
