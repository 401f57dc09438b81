package llm

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func sniff(t *testing.T, mode sniffMode, body string, oneByte bool) *observation {
	t.Helper()
	obs := &observation{}
	var r io.Reader = strings.NewReader(body)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	s := &sniffer{rc: io.NopCloser(r), obs: obs, mode: mode}
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != body {
		t.Fatalf("body changed: %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return obs
}

func TestSnifferOllamaDoneReason(t *testing.T) {
	body := `{"message":{"role":"assistant","content":"Par"},"done":false}
{"message":{"role":"assistant","content":"is"},"done":false}
{"message":{"role":"assistant","content":""},"done":true,"done_reason":"length","eval_count":2}
`
	for _, oneByte := range []bool{false, true} {
		if _, r, _ := sniff(t, sniffOllamaDone, body, oneByte).get(); r != "length" {
			t.Errorf("oneByte=%v: done_reason %q", oneByte, r)
		}
	}
	// Last line without a newline, and a non-streamed single object.
	if _, r, _ := sniff(t, sniffOllamaDone, `{"done":true,"done_reason":"stop"}`, false).get(); r != "stop" {
		t.Errorf("unterminated line: %q", r)
	}
	// A cut-off stream reports nothing.
	if _, r, _ := sniff(t, sniffOllamaDone, `{"done":false}`+"\n"+`{"done":tr`, true).get(); r != "" {
		t.Errorf("cut-off stream: %q", r)
	}
	// An overlong line is skipped, the following ones still parsed.
	long := `{"x":"` + strings.Repeat("a", maxSniffBytes+10) + `"}` + "\n" + `{"done":true,"done_reason":"length"}` + "\n"
	if _, r, _ := sniff(t, sniffOllamaDone, long, false).get(); r != "length" {
		t.Errorf("after long line: %q", r)
	}
}

func TestSnifferGoogleUsage(t *testing.T) {
	arr := "[{\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":1}}\n,\r\n" +
		"{\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":4}}\n]"
	for _, oneByte := range []bool{false, true} {
		_, _, u := sniff(t, sniffGoogleUsage, arr, oneByte).get()
		if u == nil || *u != (Usage{10, 4}) {
			t.Errorf("oneByte=%v: usage %+v", oneByte, u)
		}
	}
	_, _, u := sniff(t, sniffGoogleUsage, `{"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2}}`, false).get()
	if u == nil || *u != (Usage{3, 2}) {
		t.Errorf("single object: %+v", u)
	}
	// Gemini 2.5 reports thinking apart from the candidates; it is
	// billed as output.
	_, _, u = sniff(t, sniffGoogleUsage, `{"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"thoughtsTokenCount":900,"totalTokenCount":905}}`, false).get()
	if u == nil || *u != (Usage{3, 902}) {
		t.Errorf("thinking tokens: %+v, want {3 902}", u)
	}
	if _, _, u := sniff(t, sniffGoogleUsage, arr[:40], false).get(); u != nil {
		t.Errorf("incomplete body gave usage %+v", u)
	}
	if _, _, u := sniff(t, sniffGoogleUsage, "not json", false).get(); u != nil {
		t.Errorf("garbage gave usage %+v", u)
	}
}
