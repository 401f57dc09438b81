package httpgw

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	deep := strings.TrimSuffix(strings.Repeat("10.0.0.9, ", maxForwardedHops+1), ", ")
	for _, tc := range []struct {
		name, remote string
		xff          []string
		trusted      []netip.Prefix
		want         string
	}{
		{"no proxies configured: header ignored", "192.0.2.7:1234", []string{"198.51.100.1"}, nil, "192.0.2.7"},
		{"untrusted peer: a claim it makes is ignored", "192.0.2.7:1234", []string{"198.51.100.1"}, trusted, "192.0.2.7"},
		{"one proxy", "10.1.1.1:80", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"client's own claims left of the real address are not read", "10.1.1.1:80", []string{"203.0.113.66, 10.0.0.5, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"two proxies", "10.1.1.1:80", []string{"198.51.100.1, 10.2.2.2"}, trusted, "198.51.100.1"},
		{"several header lines, in order", "10.1.1.1:80", []string{"203.0.113.66", "198.51.100.1, 10.2.2.2", "10.3.3.3"}, trusted, "198.51.100.1"},
		{"empty entries skipped", "10.1.1.1:80", []string{" , 198.51.100.1 ,, "}, trusted, "198.51.100.1"},
		{"entry with a port", "10.1.1.1:80", []string{"198.51.100.1:4711"}, trusted, "198.51.100.1"},
		{"IPv6 entry with a port", "[fd00::1]:80", []string{"[2001:db8::1]:4711"}, trusted, "2001:db8::1"},
		{"IPv4-mapped entry", "10.1.1.1:80", []string{"::ffff:198.51.100.1"}, trusted, "198.51.100.1"},
		{"no header: the proxy", "10.1.1.1:80", nil, trusted, "10.1.1.1"},
		{"only proxies: the first of them", "10.1.1.1:80", []string{"10.4.4.4, 10.2.2.2"}, trusted, "10.4.4.4"},
		{"unparsable entry: the last trusted hop", "10.1.1.1:80", []string{"198.51.100.1, garbage, 10.2.2.2"}, trusted, "10.2.2.2"},
		{"too many hops: the last trusted one read", "10.1.1.1:80", []string{"198.51.100.1, " + deep}, trusted, "10.0.0.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientIP(r, tc.trusted); got != netip.MustParseAddr(tc.want) {
				t.Errorf("clientIP = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestTrustedProxyInvalid(t *testing.T) {
	_, sets := newAnswerKey(t)
	_, err := New(Config{Core: newFakeCore(t, sets[0], skill.DefaultPolicy()), TrustedProxies: []netip.Prefix{{}}})
	if err == nil || !strings.Contains(err.Error(), "trusted proxy") {
		t.Fatalf("New with an invalid trusted network: %v", err)
	}
}

// headerTransport adds X-Forwarded-For to every request, as a reverse
// proxy on loopback would.
type headerTransport struct{ xff string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", h.xff)
	return http.DefaultTransport.RoundTrip(r)
}

// TestTrustedProxyLimits: behind a trusted proxy the per-prefix limit
// counts each client, and the core is told the client's address; a peer
// that is not a trusted proxy cannot claim another address.
func TestTrustedProxyLimits(t *testing.T) {
	via := func(a *agent, xff string) *agent {
		a.hc.Transport = headerTransport{xff}
		return a
	}
	t.Run("trusted", func(t *testing.T) {
		_, core, base := fakeDoor(t, func(c *Config) {
			c.MaxSessionsPerPrefix = 1
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		})
		a := via(newAgent(t, base), "203.0.113.66, 198.51.100.1")
		b := via(newAgent(t, base), "198.51.101.1")
		a.create()
		b.create() // another /24: a count of its own
		if st, eb := a.post("/v1/sessions", map[string]string{"peer_id": a.id.String()}, nil); st != http.StatusTooManyRequests || eb.Code != CodeTooManySessions {
			t.Errorf("second open session from 198.51.100.0/24: %d %+v", st, eb)
		}
		core.mu.Lock()
		defer core.mu.Unlock()
		want := []netip.Addr{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.101.1")}
		if len(core.addrs) != 2 || core.addrs[0] != want[0] || core.addrs[1] != want[1] {
			t.Errorf("core saw addresses %v, want %v", core.addrs, want)
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		_, _, base := fakeDoor(t, func(c *Config) { c.MaxSessionsPerPrefix = 1 })
		a := via(newAgent(t, base), "198.51.100.1")
		b := via(newAgent(t, base), "198.51.101.1")
		a.create()
		if st, eb := b.post("/v1/sessions", map[string]string{"peer_id": b.id.String()}, nil); st != http.StatusTooManyRequests || eb.Code != CodeTooManySessions {
			t.Errorf("a claimed address from an untrusted peer was counted apart: %d %+v", st, eb)
		}
	})
}

// FuzzClientIP: whatever the header holds, clientIP does not panic, and
// returns the direct peer's address, an address the header names, or the
// invalid address when the peer's does not parse; a peer that is not a
// trusted proxy always gets its own address.
func FuzzClientIP(f *testing.F) {
	f.Add("10.1.1.1:80", "198.51.100.1, 10.2.2.2")
	f.Add("192.0.2.7:1", "10.0.0.1")
	f.Add("[fd00::1]:80", "[2001:db8::1]:4711, ,garbage")
	f.Add("10.1.1.1:80", strings.Repeat("10.0.0.9,", 40))
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {xff}}}
		got := clientIP(r, trusted)
		direct := remoteIP(remote)
		if !inPrefixes(direct, trusted) {
			if got != direct {
				t.Fatalf("untrusted peer %q got %v, want its own %v", remote, got, direct)
			}
			return
		}
		if got == direct {
			return
		}
		if !got.IsValid() || !containsAddr(xff, got) {
			t.Fatalf("clientIP = %v, neither the peer %q nor named in %q", got, remote, xff)
		}
	})
}

// containsAddr reports whether one of the comma-separated entries of xff
// parses (as clientIP reads it) to a.
func containsAddr(xff string, a netip.Addr) bool {
	for e := range strings.SplitSeq(xff, ",") {
		if remoteIP(strings.TrimSpace(e)) == a {
			return true
		}
	}
	return false
}
