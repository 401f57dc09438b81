// Package liblog routes the logs of the libraries under a node into the
// application's slog handler: go-libp2p's (gologshim), go-log's zap
// loggers (the Kademlia DHT) and GossipSub's. Left alone, each writes its
// own format to the process's standard error (go-libp2p and GossipSub
// logfmt text, go-log colored text), whatever the application's
// --json and --log-level say, so a program reading standard error line by
// line as JSON met lines such as `ts=... level=error ... logger=p2p-config`
// when a listen address could not be used.
//
// Routed, a library's record keeps the level its library logs at by
// default (error, or what GOLOG_LOG_LEVEL sets for its subsystem, as
// before) and then passes the application's own level too; it carries
// its subsystem as the attribute "logger". A remote peer can trigger some
// of those records, so they pass a rate limit per subsystem, message and
// peer and in total (limit.go).
package liblog

import (
	"context"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/gologshim"
	"go.uber.org/zap/zapcore"
)

// current is the handler Install gave last; nil before.
var current atomic.Pointer[slog.Handler]

var installOnce sync.Once

// Install makes h the destination of the libraries' logs from now on (a
// later call replaces it: the tests run several applications in one
// process). Call it before the libraries first log: go-libp2p resolves
// its handler at a logger's first record.
func Install(h slog.Handler) {
	current.Store(&h)
	installOnce.Do(func() {
		gologshim.SetDefaultHandler(handler{})
		golog.SetPrimaryCore(zapCore{})
	})
}

// Logger returns a logger for a library's subsystem (e.g. "pubsub") that
// goes where Install routed the others, at the subsystem's default level;
// without Install, to standard error as text, as the libraries do.
func Logger(system string) *slog.Logger {
	return slog.New(handler{system: system}.WithAttrs([]slog.Attr{slog.String("logger", system)}))
}

// minLevel is the level a library's subsystem logs at by default: its
// GOLOG_LOG_LEVEL entry, else GOLOG_LOG_LEVEL's fallback, else error.
func minLevel(system string) slog.Level {
	return gologshim.ConfigFromEnv().LevelForSystem(system)
}

var fallback = sync.OnceValue(func() slog.Handler {
	return slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
})

func target() slog.Handler {
	if h := current.Load(); h != nil {
		return *h
	}
	return fallback()
}

// handler forwards to the current target, filtered at its subsystem's
// default level. go-libp2p names the subsystem with the attribute
// "logger" (WithAttrs), before the first record.
type handler struct {
	system string
	ops    []op // WithAttrs and WithGroup calls, in order
}

// op is one WithAttrs (group "") or WithGroup call.
type op struct {
	group string
	attrs []slog.Attr
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= minLevel(h.system) && target().Enabled(ctx, l)
}

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	t := target()
	r, held := limit(h.system, r)
	if held && !t.Enabled(ctx, r.Level) {
		return nil
	}
	for _, o := range h.ops {
		if o.group != "" {
			t = t.WithGroup(o.group)
		} else {
			t = t.WithAttrs(o.attrs)
		}
	}
	return t.Handle(ctx, r)
}

func (h handler) with(o op) handler {
	n := h
	n.ops = append(append([]op(nil), h.ops...), o)
	return n
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	n := h.with(op{attrs: attrs})
	for _, a := range attrs {
		if a.Key == "logger" {
			n.system = a.Value.String()
		}
	}
	return n
}

func (h handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(op{group: name})
}

// zapCore is go-log's primary core: its loggers apply their subsystem's
// level (GOLOG_LOG_LEVEL, error by default) before a record reaches it,
// and it hands the record to the current target as a slog record.
type zapCore struct {
	fields []zapcore.Field
}

func (c zapCore) Enabled(zapcore.Level) bool { return true }

func (c zapCore) With(fields []zapcore.Field) zapcore.Core {
	return zapCore{fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c zapCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if target().Enabled(context.Background(), slogLevel(e.Level)) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c zapCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.AddAttrs(slog.Any(k, enc.Fields[k]))
	}
	t := target()
	r, held := limit(e.LoggerName, r)
	if held && !t.Enabled(context.Background(), r.Level) {
		return nil
	}
	return t.Handle(context.Background(), r)
}

func (c zapCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}
