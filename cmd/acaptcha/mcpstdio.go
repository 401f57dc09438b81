package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// mcpMaxLine bounds one line (one JSON-RPC message or batch) an MCP
// client sends over stdio: the body limit of MCP over HTTP
// (mcpserver.DefaultMaxHTTPBodyBytes). Every message a client of this
// server sends is a few KiB at most; a longer line is answered with an
// error and skipped without being buffered.
const mcpMaxLine = mcpserver.DefaultMaxHTTPBodyBytes

// mcpStdioTransport is the transport of `acaptcha mcp` over stdio: the
// SDK's newline-delimited IOTransport behind a filter that answers a line
// the SDK cannot take with a JSON-RPC error and goes on, as JSON-RPC 2.0
// (§5) and MCP's stdio transport expect of a server. The SDK ends the
// whole session at the first line that is not JSON, or JSON that is not a
// JSON-RPC message, so one malformed line from a client (or a stray debug
// print of a wrapper script) cut every later request off and acaptcha mcp
// exited 1. Answers of the filter and of the SDK share one writer, a line
// each. The end of r still ends the session once every request read has
// been answered (answerBeforeEOF).
func mcpStdioTransport(r io.Reader, w io.Writer, log *slog.Logger) mcp.Transport {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The SDK writes a message (newline included) in one Write, and so
	// does the filter: one line each on the shared output.
	lw := &lockedWriter{w: w}
	f := &lineFilter{br: bufio.NewReaderSize(r, 64<<10), w: lw, max: mcpMaxLine, log: log}
	// The SDK's own bound stays as a backstop above the filter's: a line
	// reaching it would end the session.
	inner := &mcp.IOTransport{Reader: io.NopCloser(f), Writer: nopWriteCloser{lw}, MaxLineLength: 2*mcpMaxLine + 1}
	return answerBeforeEOF(recoverTransport{Transport: inner, w: lw, filter: f})
}

// inputError marks an error reading the client's input: the SDK's reader
// stops at it, so the session ends (unlike a malformed line).
type inputError struct{ err error }

func (e *inputError) Error() string { return "read MCP client input: " + e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// lineFilter hands the SDK only lines that are one JSON-RPC message or a
// batch of them, each ended by a newline; it answers every other line
// itself. Read is called by the SDK's one reading goroutine only.
type lineFilter struct {
	br     *bufio.Reader
	w      io.Writer
	max    int
	log    *slog.Logger
	logged atomic.Bool

	pending []byte // the part of the current good line not yet read
	err     error  // the input's error, returned once pending is read
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, tooLong, err := f.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				f.err = io.EOF
			} else {
				f.err = &inputError{err}
			}
		}
		line = bytes.TrimSpace(line)
		switch {
		case tooLong:
			f.reject(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes (the line limit of acaptcha mcp over stdio); skipped", f.max))
		case len(line) == 0:
		default:
			if id, code, msg := checkLine(line); code != 0 {
				f.reject(id, code, msg)
			} else {
				f.pending = append(line, '\n')
			}
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// readLine reads up to the next newline (or the end of the input). A line
// longer than f.max is read to its end and dropped: tooLong, line nil.
func (f *lineFilter) readLine() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := f.br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > f.max+2 { // + "\r\n"
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

// checkLine says whether the SDK can take line (code 0), and otherwise
// the JSON-RPC error to answer it with and the id it answers (nil: null).
func checkLine(line []byte) (id any, code int, msg string) {
	if !json.Valid(line) {
		return nil, jsonrpc.CodeParseError, "parse error: the line is not one JSON value (acaptcha mcp reads one JSON-RPC message per line)"
	}
	switch line[0] {
	case '{':
		m, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			return readableID(line), jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: not a JSON-RPC 2.0 message: %v", err)
		}
		if bareID(m) {
			return readableID(line), jsonrpc.CodeInvalidRequest, errBareID
		}
		return nil, 0, ""
	case '[':
		var batch []json.RawMessage
		if err := json.Unmarshal(line, &batch); err != nil {
			return nil, jsonrpc.CodeParseError, fmt.Sprintf("parse error: %v", err)
		}
		if len(batch) == 0 {
			return nil, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch"
		}
		ids := map[jsonrpc.ID]bool{}
		for i, raw := range batch {
			m, err := jsonrpc.DecodeMessage(raw)
			if err != nil {
				return nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: batch element %d is not a JSON-RPC 2.0 message: %v", i, err)
			}
			if bareID(m) {
				return nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: batch element %d: %s", i, strings.TrimPrefix(errBareID, "invalid request: "))
			}
			if req, ok := m.(*jsonrpc.Request); ok && req.ID.IsValid() {
				if ids[req.ID] {
					return nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: the batch repeats the id %v", req.ID.Raw())
				}
				ids[req.ID] = true
			}
		}
		return nil, 0, ""
	default:
		return nil, jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC message is an object (or an array of them, a batch)"
	}
}

// bareID says m is an id with neither a method nor a result nor an error
// ({"jsonrpc":"2.0","id":5}): the SDK takes it for a response to a
// request it never sent and drops it without a word, and the client that
// forgot the method waits for an answer that never comes.
func bareID(m jsonrpc.Message) bool {
	r, ok := m.(*jsonrpc.Response)
	return ok && len(r.Result) == 0 && r.Error == nil
}

// errBareID is the error a bare id is answered with.
const errBareID = "invalid request: a message with an id needs a method (a request), or a result or an error (a response)"

// readableID is the id of a message that failed to decode, when it has
// one of a valid type (a string or a number), else nil.
func readableID(line []byte) any {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(m.ID, &v) != nil {
		return nil
	}
	if _, err := jsonrpc.MakeID(v); err != nil || v == nil {
		return nil
	}
	return m.ID
}

// reject answers a line the SDK is not given.
func (f *lineFilter) reject(id any, code int, msg string) {
	writeRPCError(f.w, id, code, msg)
	lvl := slog.LevelDebug
	if !f.logged.Swap(true) {
		lvl = slog.LevelWarn // the first; the client gets each as an error response
	}
	f.log.Log(context.Background(), lvl, "acaptcha mcp: answered a malformed line from the MCP client with an error and went on", "code", code, "error", msg)
}

// writeRPCError writes one JSON-RPC error response line; id nil is
// written as null (JSON-RPC 2.0 §5: the id of a request whose id could
// not be read).
func writeRPCError(w io.Writer, id any, code int, msg string) {
	b, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	if err != nil {
		return
	}
	_, _ = w.Write(append(b, '\n'))
}

// recoverTransport answers the messages the SDK refuses after the filter
// let them through (a batch once the client negotiated MCP 2025-06-18 or
// later, which has no batches; a batch repeating the id of a request
// still in flight) with an Invalid Request error and reads on: the SDK's
// connection returns them as read errors, which end the session.
type recoverTransport struct {
	mcp.Transport
	w      io.Writer
	filter *lineFilter
}

func (t recoverTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recoverConn{Connection: c, w: t.w, filter: t.filter}, nil
}

type recoverConn struct {
	mcp.Connection
	w      io.Writer
	filter *lineFilter
}

func (c *recoverConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		var (
			ie *inputError
			se *json.SyntaxError
		)
		if err == nil || errors.Is(err, io.EOF) || errors.As(err, &ie) || errors.As(err, &se) || ctx.Err() != nil {
			// The SDK's reader stops at these (a syntax error cannot
			// reach it through the filter; were one to, the session
			// ends rather than waits for a reader that is gone).
			return msg, err
		}
		// Every other error is of a line the filter checked as JSON and
		// passed whole, refused while parsing it after the SDK's reader
		// handed it on: that reader reads on.
		c.filter.reject(nil, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
}
