package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// Answer modes of acaptcha mcp (--answer-with).
const (
	answerAuto  = "auto"
	answerAgent = "agent"
	answerLLM   = "llm"
)

// mcpShutdownTimeout bounds the streamable HTTP server's shutdown (its
// other limits are mcpserver.NewHTTPServer's and HTTPConfig's).
const mcpShutdownTimeout = 5 * time.Second

// mcpRequestGrace is how long requests still open after a stop's tool
// calls have ended keep their context: a response being written
// finishes, and a request that would hang (a client's GET stream, a
// session whose close waits on it) ends then rather than holding the
// stop for mcpShutdownTimeout.
const mcpRequestGrace = time.Second

func (a *app) mcpCmd() *cobra.Command {
	var (
		httpAddr      string
		answerWith    string
		maxPending    int
		maxAttests    int
		httpMaxConns  int
		privateDials  bool
		attestTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve an acaptcha node to an MCP client (stdio, or streamable HTTP with --http)",
		Long: `Starts a node from the node flags below and serves it as a Model Context Protocol
server on standard input and output (or over streamable HTTP with --http), so
that an assistant or agent SDK can attest peers, verify attestations, list
attestations and peers, and be verified itself.

With --answer-with agent (the default without --llm) the MCP client is the
node's prover: every challenge a verifier sends this node is handed to it by
the next_challenge tool and its answer taken by answer_challenge, while the
node keeps the clock and signs as usual. attest_peer with self_answer has
the attested peer verify this node back through these tools. With --llm
(and --answer-with auto or llm) the node answers with that LLM instead.

Standard output carries the MCP protocol only; logs go to standard error.
The listen address defaults to ephemeral loopback and wildcard ports (give
--listen to be reachable at a fixed one). Use --store and --key apart from
a running node's (its store is locked while it runs).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch answerWith {
			case answerAuto:
				answerWith = answerAgent
				if a.llmSpec != "" {
					answerWith = answerLLM
				}
			case answerAgent:
			case answerLLM:
				if a.llmSpec == "" {
					return usageErr("--answer-with llm: %s", noLLMHint)
				}
			default:
				return usageErr("--answer-with %q: want auto, agent or llm", answerWith)
			}
			if maxPending < 1 {
				return usageErr("--max-pending %d: want at least 1", maxPending)
			}
			if maxAttests < 1 {
				return usageErr("--max-attests %d: want at least 1", maxAttests)
			}
			if httpMaxConns < 1 {
				return usageErr("--http-max-conns %d: want at least 1", httpMaxConns)
			}
			if httpAddr == "" {
				// Over stdio there is one client and no caller to dial
				// for: taken without --http they would be ignored.
				for _, name := range []string{"http-max-conns", "http-private-dials"} {
					if cmd.Flags().Changed(name) {
						return usageErr("--%s needs --http: it applies to MCP over streamable HTTP, not stdio", name)
					}
				}
			}
			if fl := cmd.Flags().Lookup("pool-size"); fl != nil && !fl.Changed {
				// An agent's MCP server verifies a peer now and then: a
				// pool of the node's size would write sets at each launch
				// that nobody reads.
				a.gen.poolSize = 1
			}
			if attestTimeout < 0 {
				return usageErr("--attest-timeout must not be negative")
			}
			if attestTimeout > mcpserver.MaxAttestTimeout {
				// The server would cut it to its cap without a word.
				return usageErr("--attest-timeout %s: at most %s, the longest attest_peer runs", attestTimeout, mcpserver.MaxAttestTimeout)
			}
			if httpAddr != "" {
				if err := checkHostPort("--http", httpAddr, "127.0.0.1:8765"); err != nil {
					return err
				}
			}
			var queue *mcpserver.Queue
			if answerWith == answerAgent {
				queue = mcpserver.NewQueue(mcpserver.QueueConfig{MaxPending: maxPending, Logger: a.log})
				defer queue.Close()
				a.agentProver = queue
			}
			listen := a.listen
			if len(listen) == 0 {
				listen = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
			}
			n, llmName, err := a.startNode(cmd, listen, nil)
			if err != nil {
				return err
			}
			a.checkLLMAtStart()
			defer func() {
				a.closeNode(n)
			}()
			if attestTimeout == 0 {
				pol, _ := a.policy()
				attestTimeout = 2*pol.Total + 30*time.Second
			}
			srv, err := mcpserver.New(mcpserver.Config{
				Node: n, Queue: queue, NodeAnswers: answerWith == answerLLM,
				AttestTimeout: attestTimeout, Version: buildVersion().Version, Logger: a.log,
				MaxAttests: maxAttests,
				// Sessions from beyond loopback name public addresses
				// only unless the operator allows more.
				RemotePrivateDials: privateDials,
				// With an LLM pool the first set is written after start:
				// an attestation asked meanwhile waits for it.
				Ready: a.waitForSet,
			})
			if err != nil {
				return err
			}
			defer srv.Close()
			a.log.Info("acaptcha mcp node started", "peer_id", n.ID(), "addrs", n.Addrs(), "answers", answerWith, "llm", llmName, "challenges", a.challenges)
			ctx := cmd.Context()
			if httpAddr != "" {
				var addrs []string
				for _, m := range n.Addrs() {
					addrs = append(addrs, m.String())
				}
				return a.serveMCPHTTP(ctx, httpAddr, srv, httpMaxConns, n.ID().String(), addrs)
			}
			t := mcpStdioTransport(a.stdin, a.stdout, a.log)
			err = srv.Run(ctx, t)
			switch {
			case err == nil, ctx.Err() != nil, errors.Is(err, io.EOF):
				// The client closed the session, or we were stopped.
				return nil
			default:
				return fmt.Errorf("mcp session: %w", err)
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&httpAddr, "http", "", "serve MCP over streamable HTTP at http://ADDR/mcp instead of stdio (no authentication: bind it to loopback); off, or leaving the flag out, for stdio (an empty value is refused); environment ACAPTCHA_MCP_HTTP (ACAPTCHA_HTTP is node's HTTP door)")
	_ = f.SetAnnotation("http", envAnnotation, []string{"ACAPTCHA_MCP_HTTP"})
	f.StringVar(&answerWith, "answer-with", answerAuto, "who answers the challenges verifiers send this node: agent (the MCP client, through next_challenge and answer_challenge), llm (--llm), or auto (llm with --llm, else agent)")
	f.IntVar(&maxPending, "max-pending", mcpserver.DefaultMaxPending, "challenges that may wait for the MCP client's answer at once (beyond it they are declined)")
	f.IntVar(&httpMaxConns, "http-max-conns", mcpserver.DefaultMaxHTTPConns, "with --http: connections open at once (beyond loopback an eighth per IPv4 /24 or IPv6 /48 and three quarters for all networks; one beyond is closed at once)")
	f.BoolVar(&privateDials, "http-private-dials", false, "with --http: MCP sessions from beyond loopback may have attest_peer dial loopback, private and link-local addresses and DNS names (by default they name a public IP address; loopback sessions dial anything)")
	f.IntVar(&maxAttests, "max-attests", mcpserver.DefaultMaxAttests, fmt.Sprintf("attest_peer calls (foreground and background) running at once; one MCP session runs at most %d of them (beyond, a call is refused at once)", mcpserver.DefaultMaxAttestsPerSession))
	f.DurationVar(&attestTimeout, "attest-timeout", 0, "attest_peer's default time limit, at most 30m (default twice the total budget plus 30 s)")
	return cmd
}

// answerBeforeEOF wraps a stdio transport so that the end of standard
// input ends the session only once every request read has been answered:
// the SDK cancels the requests in flight at EOF, so a client that writes
// its requests and closes its end (printf ... | acaptcha mcp) got no
// response at all, not even to initialize, and exit 0.
func answerBeforeEOF(t mcp.Transport) mcp.Transport { return drainTransport{t} }

type drainTransport struct{ mcp.Transport }

func (t drainTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainConn{Connection: c, pending: map[jsonrpc.ID]int{}, wake: make(chan struct{}, 1), closed: make(chan struct{})}, nil
}

// drainConn counts the requests read and the responses written; its Read
// holds back EOF until they balance, the session is closed or ctx ends.
type drainConn struct {
	mcp.Connection
	mu        sync.Mutex
	pending   map[jsonrpc.ID]int
	wake      chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.ID.IsValid() {
		c.mu.Lock()
		c.pending[req.ID]++
		c.mu.Unlock()
	}
	if errors.Is(err, io.EOF) {
		for {
			c.mu.Lock()
			n := len(c.pending)
			c.mu.Unlock()
			if n == 0 {
				break
			}
			select {
			case <-c.wake:
			case <-c.closed:
				return msg, err
			case <-ctx.Done():
				return msg, err
			}
		}
	}
	return msg, err
}

func (c *drainConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		c.mu.Lock()
		if c.pending[resp.ID]--; c.pending[resp.ID] <= 0 {
			delete(c.pending, resp.ID)
		}
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return err
}

func (c *drainConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

// nopWriteCloser keeps the MCP transport from closing standard output.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveMCPHTTP serves the MCP server over streamable HTTP at /mcp until
// ctx ends.
//
// It announces the endpoint with the node's peer ID and libp2p addresses
// (as acaptcha node does), which a peer needs to attest this node.
func (a *app) serveMCPHTTP(ctx context.Context, addr string, srv *mcpserver.Server, maxConns int, peerID string, p2pAddrs []string) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		// The address was checked (checkHostPort): a port in use or an
		// address not of this host is a server that cannot start (exit 1).
		return fmt.Errorf("--http: listen on %s: %w", addr, err)
	}
	if host, _, err := net.SplitHostPort(l.Addr().String()); err == nil {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			a.log.Warn("the MCP endpoint has no authentication and listens beyond loopback: whoever reaches it can attest peers and answer challenges as this node", "addr", l.Addr().String())
		}
	}
	mux := http.NewServeMux()
	// Sessions are bounded (mcpserver.DefaultMaxHTTPSessions open, shared
	// by network beyond loopback, closed after
	// mcpserver.DefaultHTTPSessionTimeout idle): the SDK's handler kept
	// each until its client deleted it. Connections are capped the same
	// way (mh.Listener), and a request's body must arrive within
	// mcpserver.DefaultHTTPBodyTimeout.
	mh, err := mcpserver.NewHTTPHandler(srv, mcpserver.HTTPConfig{Logger: a.log, MaxConns: maxConns})
	if err != nil {
		return err
	}
	defer mh.Close()
	mux.Handle("/mcp", mh)
	hs := mcpserver.NewHTTPServer(mux)
	reqCtx, endRequests := context.WithCancel(context.Background())
	defer endRequests()
	hs.BaseContext = func(net.Listener) context.Context { return reqCtx }
	// Say where the endpoint is: on standard error as a notice, or with
	// --json as one JSON object on standard output (free in this mode;
	// standard error then carries JSON only).
	// A listener on every interface is announced by its loopback URL,
	// which a client on this machine opens (http://[::]:PORT is not).
	hostport, all := openableHostPort(l.Addr())
	url := fmt.Sprintf("http://%s/mcp", hostport)
	if a.jsonOut {
		ann := map[string]any{"mcp_url": url, "peer_id": peerID, "addrs": p2pAddrs}
		if all {
			ann["all_interfaces"] = true
		}
		if err := writeJSON(a, ann); err != nil {
			return err
		}
	} else {
		// One write: the URL line first (what a script waits for), then
		// who the node is.
		var b strings.Builder
		fmt.Fprintf(&b, "acaptcha mcp: streamable HTTP at %s%s\n  node %s\n", url, allInterfaces(all), peerID)
		for _, m := range p2pAddrs {
			fmt.Fprintf(&b, "  listening on %s\n", m)
		}
		_, _ = io.WriteString(a.stderr, b.String())
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(mh.Listener(l)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("mcp http server: %w", err)
	case <-ctx.Done():
	}
	// The tool calls in flight end first (a long-poll waits up to a
	// minute, an attest_peer up to its timeout), then the sessions (a
	// client's GET stream stays open as long as its session): the
	// shutdown below waits for their requests, which end at the latest
	// mcpRequestGrace after the stop.
	grace := time.AfterFunc(mcpRequestGrace, endRequests)
	defer grace.Stop()
	srv.Close()
	mh.Close()
	sctx, cancel := context.WithTimeout(context.Background(), mcpShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	<-errc
	return nil
}
