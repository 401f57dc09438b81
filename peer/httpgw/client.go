package httpgw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol"
)

// Client is a Go client of the HTTP door, for agents written in Go (and
// the tests and examples): it holds the agent's libp2p key and runs whole
// sessions. Other languages follow spec/http.md.
type Client struct {
	// Base is the door's base URL, e.g. http://127.0.0.1:8080.
	Base string
	// Key is the agent's libp2p private key; the attestation binds its
	// peer ID.
	Key crypto.PrivKey
	// HTTP is the HTTP client (default: one with a 2-minute timeout).
	HTTP *http.Client
	// MaxPowDifficulty is the most proof of work the client pays (default
	// protocol.DefaultMaxPowDifficulty).
	MaxPowDifficulty int
}

// maxResponseBytes caps a response the client reads.
const maxResponseBytes = 1 << 20

// Do sends in as JSON (a GET when in is nil) to path and decodes the
// response into out; an error status returns the *ErrorBody.
func (c *Client) Do(ctx context.Context, path string, in, out any) error {
	method, body := http.MethodGet, io.Reader(nil)
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s request: %w", path, err)
		}
		method, body = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		var e ErrorBody
		if json.Unmarshal(data, &e) != nil || e.Code == "" {
			return fmt.Errorf("%s %s: status %d: %.200q", method, path, resp.StatusCode, data)
		}
		return &e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// Manifest fetches the door's manifest.
func (c *Client) Manifest(ctx context.Context) (*Manifest, error) {
	var m Manifest
	if err := c.Do(ctx, ManifestPath, nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Attest runs one session: answer is the agent's brain, called once per
// round with the challenge (it may take its time: the node's clock runs).
// It returns the result; an error means no verdict was reached.
func (c *Client) Attest(ctx context.Context, answer func(context.Context, *Challenge) (string, error)) (*Result, error) {
	if c.Key == nil {
		return nil, errors.New("httpgw client: no key")
	}
	id, err := peer.IDFromPrivateKey(c.Key)
	if err != nil {
		return nil, fmt.Errorf("httpgw client: peer ID: %w", err)
	}
	var s Session
	if err := c.Do(ctx, "/v1/sessions", map[string]string{"peer_id": id.String()}, &s); err != nil {
		return nil, err
	}
	if s.PowDifficulty == nil {
		return nil, errors.New("httpgw client: the session names no pow_difficulty")
	}
	verifier, err := peer.Decode(s.Verifier)
	if err != nil {
		return nil, fmt.Errorf("httpgw client: verifier peer ID: %w", err)
	}
	// Sign the message the spec defines, never a blob the server chose.
	msg := StartMessage(s.SessionID, s.Nonce, verifier, id)
	if !bytes.Equal(msg, s.StartMessage) {
		return nil, errors.New("httpgw client: the server's start_message is not the spec's: refusing to sign")
	}
	sig, err := c.Key.Sign(msg)
	if err != nil {
		return nil, fmt.Errorf("httpgw client: sign: %w", err)
	}
	pub, err := crypto.MarshalPublicKey(c.Key.GetPublic())
	if err != nil {
		return nil, fmt.Errorf("httpgw client: public key: %w", err)
	}
	maxD := c.MaxPowDifficulty
	if maxD == 0 {
		maxD = protocol.DefaultMaxPowDifficulty
	}
	pow, err := protocol.SolvePow(ctx, s.Nonce, id, *s.PowDifficulty, maxD)
	if err != nil {
		return nil, fmt.Errorf("httpgw client: %w", err)
	}
	path := "/v1/sessions/" + s.SessionID
	if err := c.Do(ctx, path+"/start", startRequest{PublicKey: pub, Signature: sig, Pow: pow}, &s); err != nil {
		return nil, err
	}
	for i := 0; s.State == StateProbing && s.Probe != nil && i < protocol.MaxProbes; i++ {
		if err := c.Do(ctx, path+"/probe", probeRequest{Seq: &s.Probe.Seq, Nonce: &s.Probe.Nonce}, &s); err != nil {
			return nil, err
		}
	}
	for i := 0; s.State == StateAnswering && s.Challenge != nil && i < 3; i++ {
		ans, err := answer(ctx, s.Challenge)
		if err != nil {
			return nil, fmt.Errorf("httpgw client: answer round %d: %w", s.Challenge.Round, err)
		}
		if err := c.Do(ctx, path+"/answer", answerRequest{Round: &s.Challenge.Round, Answer: &ans}, &s); err != nil {
			return nil, err
		}
	}
	if s.State != StateDone || s.Result == nil {
		if s.Error != nil {
			return nil, fmt.Errorf("httpgw client: session %s: %w", s.State, s.Error)
		}
		return nil, fmt.Errorf("httpgw client: session ended %s without a result", s.State)
	}
	return s.Result, nil
}
