package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A stdio client that sends a line that is not JSON, or JSON that is not
// a JSON-RPC message, gets a JSON-RPC error for it (-32700 for a parse
// error, -32600 for an invalid request, with the request's id when one
// can be read, else null) and the session goes on: before, the SDK ended
// the session at the first such line (acaptcha mcp exited 1 with "mcp
// session: invalid character ...") and every later request went
// unanswered.
func TestMCPStdioMalformedLineAnswered(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":"big","method":"tools/list","params":{"pad":"` + strings.Repeat("x", mcpMaxLine) + `"}}`
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`hello, not json`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"} {"x":1}`,
		`42`,
		`{"jsonrpc":"1.0","id":4,"method":"tools/list"}`,
		`{"id":"five","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`[]`,
		`[{"jsonrpc":"2.0","id":6,"method":"tools/list"},7]`,
		`[{"jsonrpc":"2.0","id":8,"method":"tools/list"}]`,
		`[{"jsonrpc":"2.0","id":10,"method":"tools/list"},{"jsonrpc":"2.0","id":10,"method":"tools/list"}]`,
		long,
		``,
		`   `,
		`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{}, struct{}{}, nil
	})
	var out syncBuffer
	tr := mcpStdioTransport(strings.NewReader(strings.Join(lines, "\n")+"\n"), &out, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Run(ctx, tr); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("session ended on a malformed line: %v\nstdout:\n%s", err, out.String())
	}
	type resp struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var got []resp
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.Contains(l, `"jsonrpc":"2.0"`) {
			t.Errorf("line %q lacks the version tag", l)
		}
		var r resp
		if err := json.Unmarshal([]byte(l), &r); err == nil {
			got = append(got, r)
			continue
		}
		var batch []resp // the answer to a batch
		if err := json.Unmarshal([]byte(l), &batch); err != nil || len(batch) != 1 {
			t.Fatalf("stdout line %q is not a JSON-RPC message nor a batch of one: %v", l, err)
		}
		got = append(got, batch...)
	}
	wants := []stdioWant{
		{"1", 0},
		{"null", -32700},   // not JSON
		{"null", -32700},   // two values on one line
		{"null", -32600},   // not an object
		{"4", -32600},      // wrong version tag, id readable
		{`"five"`, -32600}, // no version tag
		{"null", -32600},   // id of the wrong type
		{"null", -32600},   // empty batch
		{"null", -32600},   // a batch holding a non-message
		{"8", 0},           // a batch (stdio takes them whatever the version)
		{"null", -32600},   // a batch repeating an id
		{"null", -32600},   // a line over the limit
		{"9", 0},
	}
	// Errors of the filter are written as their lines are read, results
	// when their handlers return: compare as multisets.
	count := map[string]int{}
	for _, w := range wants {
		count[w.key()]++
	}
	var limitSaid bool
	for _, g := range got {
		w := stdioWant{string(g.ID), 0}
		if g.ID == nil {
			w.id = "absent"
		}
		switch {
		case g.Error != nil && g.Result == nil && g.Error.Message != "":
			w.code = g.Error.Code
			limitSaid = limitSaid || strings.Contains(g.Error.Message, "1048576 bytes")
		case g.Error == nil && g.Result != nil:
		default:
			t.Errorf("malformed response %+v", g)
		}
		count[w.key()]--
	}
	for k, n := range count {
		if n != 0 {
			t.Errorf("%s: %d responses fewer than wanted (negative: more)", k, n)
		}
	}
	if !limitSaid {
		t.Errorf("no error says the line limit:\n%s", out.String())
	}
}

type stdioWant struct {
	id   string
	code int
}

func (w stdioWant) key() string { return fmt.Sprintf("id %s code %d", w.id, w.code) }

// A batch that repeats the id of a request of an earlier batch still in
// flight passes the line filter (the filter cannot know what is in
// flight) and is refused by the SDK while parsing it: that refusal is
// answered too, and the session goes on (recoverConn). Before, it ended
// the session.
func TestMCPStdioBatchRepeatingInFlightID(t *testing.T) {
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, struct{}{}, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, struct{}{}, nil
	})
	pr, pw := io.Pipe()
	var out syncBuffer
	tr := mcpStdioTransport(pr, &out, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, tr) }()
	write := func(s string) {
		if _, err := io.WriteString(pw, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(sub string) {
		for i := 0; i < 1000 && !strings.Contains(out.String(), sub); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if !strings.Contains(out.String(), sub) {
			t.Fatalf("no %q in the output:\n%s", sub, out.String())
		}
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	waitFor(`"id":1,`)
	write(`[{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}]`)
	write(`[{"jsonrpc":"2.0","id":5,"method":"tools/list"}]`)
	waitFor(`"id":null`)
	close(release)
	waitFor(`"done"`)
	write(`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	waitFor(`"id":6,`)
	pw.Close()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the session did not end at EOF")
	}
}
