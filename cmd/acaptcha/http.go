package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/httpgw"
)

// startHTTPDoor serves the node's HTTP door (peer/httpgw, spec/http.md)
// on addr when it is set; it returns the door's URL, the least proof of
// work the door asks of its clients whatever the node's own base (its
// floor for anonymous clients, spec/http.md §8), and how to stop it
// (before the node closes: sessions in flight end first).
// startHTTPDoor serves the HTTP door on addr (none when empty). drain
// lets its running sessions end (httpgw.Gateway.Drain), stop closes it.
// all says the door listens on every interface (url then names the
// loopback address, which a user on this machine can open).
func (a *app) startHTTPDoor(n *peer.Node, addr string, proxies []netip.Prefix) (url string, all bool, pow int, drain func(context.Context) error, stop func(), err error) {
	if addr == "" {
		return "", false, 0, func(context.Context) error { return nil }, func() {}, nil
	}
	gw, err := httpgw.ForNode(n.Door(), httpgw.Config{Logger: a.log, TrustedProxies: proxies})
	if err != nil {
		return "", false, 0, nil, nil, fmt.Errorf("--http: %w", err)
	}
	bound, err := gw.Listen(addr)
	if err != nil {
		// The address was checked (checkHTTPAddr): the port is taken, or
		// the host is not this machine's.
		_ = gw.Close()
		return "", false, 0, nil, nil, fmt.Errorf("--http: %w", err)
	}
	// The stop runs twice (the node's drain, and deferred): once is enough.
	hostport, all := openableHostPort(bound)
	return "http://" + hostport, all, gw.MinPowDifficulty(), gw.Drain, sync.OnceFunc(func() { _ = gw.Close() }), nil
}

// checkHTTPAddr refuses an --http value that is not HOST:PORT.
func checkHTTPAddr(addr string) error {
	if addr == "" {
		return nil
	}
	return checkHostPort("--http", addr, "127.0.0.1:8080")
}

// checkDistinctPorts refuses --http and --metrics on the same port of
// overlapping hosts (one of them unspecified, or the same host): the
// second listener would fail with "address already in use" after the
// node started.
func checkDistinctPorts(httpAddr, metricsAddr string) error {
	if httpAddr == "" || metricsAddr == "" {
		return nil
	}
	hh, hp, err1 := net.SplitHostPort(httpAddr)
	mh, mp, err2 := net.SplitHostPort(metricsAddr)
	if err1 != nil || err2 != nil || hp != mp || hp == "0" {
		return nil
	}
	unspecified := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || ip != nil && ip.IsUnspecified()
	}
	if hh == mh || unspecified(hh) || unspecified(mh) {
		return usageErr("--http %s and --metrics %s use the same port: give each its own", httpAddr, metricsAddr)
	}
	return nil
}

// checkHostPort refuses a listen address that is not HOST:PORT with a
// port in 0..65535 (a usage error, before anything starts).
func checkHostPort(flag, addr, example string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil && port != "" {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil {
			if _, lerr := net.LookupPort("tcp", port); lerr != nil {
				return usageErr("%s %q: port %q is not a number in 0..65535 nor a service name", flag, addr, port)
			}
		}
		return nil
	}
	return usageErr("%s %q: want HOST:PORT, e.g. %s", flag, addr, example)
}

// parseTrustedProxies reads --http-trusted-proxy: addresses (a network of
// one) and networks, repeated or comma-separated.
func parseTrustedProxies(vals []string, httpAddr string) ([]netip.Prefix, error) {
	if len(vals) > 0 && httpAddr == "" {
		return nil, usageErr("--http-trusted-proxy needs --http: it names the proxies in front of the HTTP door")
	}
	var out []netip.Prefix
	for _, v := range vals {
		for f := range strings.SplitSeq(v, ",") {
			f = strings.TrimSpace(f)
			if p, err := netip.ParsePrefix(f); err == nil {
				if p.Addr().Is4In6() && p.Bits() >= 96 {
					// The door compares unmapped addresses.
					p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
				}
				out = append(out, p.Masked())
				continue
			}
			if ip, err := netip.ParseAddr(f); err == nil && ip.Zone() == "" {
				ip = ip.Unmap()
				out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			return nil, usageErr("--http-trusted-proxy %q: want an IP address or a network such as 10.0.0.0/8", f)
		}
	}
	return out, nil
}
