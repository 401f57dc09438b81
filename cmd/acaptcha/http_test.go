package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/peer/httpgw"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

// httpAnswerKey answers the embedded example sets from their ground truth.
func httpAnswerKey(t *testing.T) func(context.Context, *httpgw.Challenge) (string, error) {
	t.Helper()
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	key := map[[32]byte]string{}
	k := func(n, q string) [32]byte {
		return sha256.Sum256([]byte(strings.Join(strings.Fields(n), " ") + "\x00" + strings.Join(strings.Fields(q), " ")))
	}
	for _, s := range sets {
		for _, p := range s.Parts {
			for _, q := range p.Questions {
				key[k(p.Narrative, q.Question)] = q.Answer
			}
		}
	}
	return func(_ context.Context, c *httpgw.Challenge) (string, error) {
		if a, ok := key[k(c.Narrative, c.Question)]; ok {
			return a, nil
		}
		return "unknown", nil
	}
}

// TestHTTPDoorEndToEnd is the acceptance of the HTTP door: `acaptcha node
// --http 127.0.0.1:0` (the CLI, in process) gives an agent with an answer
// key a signed acceptance that `acaptcha attestations verify` accepts; a
// slow agent gets timeout and a script wrong_answer, both signed; the node
// stores the three records as ones it issued.
func TestHTTPDoorEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node and three HTTP sessions")
	}
	dir := t.TempDir()
	store := filepath.Join(dir, "db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var errb syncBuffer
	exit := make(chan int, 1)
	go func() {
		code := Main(ctx, []string{"node", "--json", "--http", "127.0.0.1:0", "--challenges", "examples", "--tau", "3s",
			"--key", filepath.Join(dir, "key"), "--store", store, "--listen", "/ip4/127.0.0.1/tcp/0",
			"--mdns=false", "--gossip=false", "--log-level", "warn"}, pw, &errb)
		pw.Close()
		exit <- code
	}()
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(pr)
		l, _ := br.ReadString('\n')
		lines <- l
		_, _ = io.Copy(io.Discard, br)
	}()
	var info struct {
		PeerID string `json:"peer_id"`
		HTTP   string `json:"http"`
	}
	select {
	case l := <-lines:
		if err := json.Unmarshal([]byte(l), &info); err != nil || !strings.HasPrefix(info.HTTP, "http://127.0.0.1:") {
			t.Fatalf("node printed %q (%v); stderr:\n%s", l, err, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("node printed nothing; stderr:\n%s", errb.String())
	}

	answer := httpAnswerKey(t)
	attest := func(brain func(context.Context, *httpgw.Challenge) (string, error)) (*httpgw.Result, lpeer.ID) {
		t.Helper()
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := lpeer.IDFromPrivateKey(key)
		actx, acancel := context.WithTimeout(ctx, time.Minute)
		defer acancel()
		res, err := (&httpgw.Client{Base: info.HTTP, Key: key}).Attest(actx, brain)
		if err != nil {
			t.Fatalf("attest over HTTP: %v\nstderr:\n%s", err, errb.String())
		}
		return res, id
	}

	// 1. An agent: accepted, and the CLI verifies the record.
	res, agentID := attest(answer)
	if !res.Accepted || res.Verdict != "ACCEPTED" || len(res.Rounds) != 3 || len(res.Attestation) == 0 {
		t.Fatalf("agent with the answer key: %+v", res)
	}
	file := filepath.Join(dir, "agent.att")
	if err := os.WriteFile(file, res.Attestation, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, eout syncBuffer
	if code := Main(context.Background(), []string{"attestations", "verify", file, "--subject", agentID.String(), "--issuer", info.PeerID}, &out, &eout); code != 0 || !strings.Contains(out.String(), "VALID signed attestation, verdict ACCEPTED") {
		t.Fatalf("acaptcha attestations verify: exit %d\n%s\n%s", code, out.String(), eout.String())
	}

	// 2. A slow agent (right answers, past tau): timeout, signed.
	res, _ = attest(func(ctx context.Context, c *httpgw.Challenge) (string, error) {
		select {
		case <-time.After(time.Duration(c.BudgetMs)*time.Millisecond + 700*time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return answer(ctx, c)
	})
	if res.Accepted || res.Reason != string(skill.ReasonTimeout) || res.FailedRound != 1 || len(res.Attestation) == 0 {
		t.Errorf("slow agent: %+v", res)
	}
	// 3. A script: wrong_answer, signed.
	res, _ = attest(func(context.Context, *httpgw.Challenge) (string, error) { return "unknown", nil })
	if res.Accepted || res.Reason != string(skill.ReasonWrongAnswer) || len(res.Attestation) == 0 {
		t.Errorf("script: %+v", res)
	}

	// 4. The node stops (a signal) while an agent is in round 1: the
	// door drains, the agent gets its verdict, signed and stored.
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	inRound := make(chan struct{})
	var once sync.Once
	type outcome struct {
		res *httpgw.Result
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		actx, acancel := context.WithTimeout(context.Background(), time.Minute)
		defer acancel()
		res, err := (&httpgw.Client{Base: info.HTTP, Key: key}).Attest(actx, func(ctx context.Context, c *httpgw.Challenge) (string, error) {
			once.Do(func() { close(inRound) })
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return answer(ctx, c)
		})
		got <- outcome{res, err}
	}()
	select {
	case <-inRound:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent got no challenge")
	}
	cancel()
	select {
	case o := <-got:
		if o.err != nil || !o.res.Accepted || len(o.res.Attestation) == 0 {
			t.Fatalf("agent in round 1 when the node stopped: %+v %v\nstderr:\n%s", o.res, o.err, errb.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the agent got no verdict")
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("node exited %d; stderr:\n%s", code, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("node did not stop")
	}
	// The node stored the four records as issued.
	var list, lerr syncBuffer
	if code := Main(context.Background(), []string{"attestations", "list", "--store", store, "--json"}, &list, &lerr); code != 0 {
		t.Fatalf("attestations list: exit %d: %s", code, lerr.String())
	}
	if n := strings.Count(list.String(), info.PeerID); n < 4 {
		t.Errorf("the store lists %d records issued by the node, want 4:\n%s", n, list.String())
	}
}
