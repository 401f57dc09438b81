package liblog

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Teardown demotes the records of the loggers it wraps to DEBUG once it
// has started: a program that closes many nodes of its own at the end of
// a run (bench swarm) would otherwise print a warning from every node
// still open about each session the closed ones broke off, and
// go-libp2p's own about their connections, after the run has ended.
// Before Start every record passes as it is, so warnings during the run
// are kept. A demoted record carries its level as level_at_teardown. Its
// zero value is ready.
type Teardown struct {
	on atomic.Bool
}

// Start demotes, from now on, every record at INFO or above that the
// handlers of t log.
func (t *Teardown) Start() { t.on.Store(true) }

// Started reports whether Start was called.
func (t *Teardown) Started() bool { return t.on.Load() }

// Handler wraps h: records pass until t starts, then go to DEBUG.
func (t *Teardown) Handler(h slog.Handler) slog.Handler {
	return teardownHandler{t: t, next: h}
}

type teardownHandler struct {
	t    *Teardown
	next slog.Handler
}

func (h teardownHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if h.t.on.Load() && l >= slog.LevelInfo {
		l = slog.LevelDebug
	}
	return h.next.Enabled(ctx, l)
}

func (h teardownHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.t.on.Load() && r.Level >= slog.LevelInfo {
		d := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool { d.AddAttrs(a); return true })
		d.AddAttrs(slog.String("level_at_teardown", r.Level.String()))
		if !h.next.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		return h.next.Handle(ctx, d)
	}
	return h.next.Handle(ctx, r)
}

func (h teardownHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.next = h.next.WithAttrs(attrs)
	return h
}

func (h teardownHandler) WithGroup(name string) slog.Handler {
	h.next = h.next.WithGroup(name)
	return h
}
