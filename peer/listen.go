package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// DefaultPort is the node's default TCP and UDP (QUIC) port. It is not
// 4001, the port of IPFS (kubo) nodes: a host running both would have the
// two share the port (below).
const DefaultPort = 4717

// DefaultListenAddrs are TCP and QUIC on all IPv4 interfaces, port
// DefaultPort.
var DefaultListenAddrs = []string{
	"/ip4/0.0.0.0/tcp/" + strconv.Itoa(DefaultPort),
	"/ip4/0.0.0.0/udp/" + strconv.Itoa(DefaultPort) + "/quic-v1",
}

// ListensBeyondLoopback reports whether a node listening on addrs
// (DefaultListenAddrs when none) can be reached from beyond loopback: one
// of them is anything but a loopback IP address or a DNS name that
// resolves to loopback addresses only. An unspecified IP address covers
// every interface; a DNS name (/dns, /dns4, /dns6) is looked up in its
// family as libp2p does when it listens (/dns4/localhost listens on
// 127.0.0.1), and one that does not resolve counts as beyond; an IPv6
// zone (/ip6zone) is read through to its address; a relay address
// (/p2p-circuit), an address that does not parse and any other are
// beyond (erring on the safe side).
func ListensBeyondLoopback(addrs []string) bool {
	if len(addrs) == 0 {
		addrs = DefaultListenAddrs
	}
	for _, s := range addrs {
		if !listensOnLoopback(s) {
			return true
		}
	}
	return false
}

// ReachableBeyondLoopback reports whether peers from beyond loopback can
// reach a node that listens on listen (ListensBeyondLoopback) and
// reserves slots with relays (Config.Relays, the CLI's --relay): a relay
// exists to carry connections from elsewhere, so a node with one is
// reachable beyond loopback however narrowly it listens (a node that
// listens on 127.0.0.1 only and reserves a slot with a public relay is
// reached from the whole internet, its peers arriving through the
// relay's address).
func ReachableBeyondLoopback(listen, relays []string) bool {
	return len(relays) > 0 || ListensBeyondLoopback(listen)
}

// listenLookupTimeout bounds the lookup of one DNS listen address.
const listenLookupTimeout = 2 * time.Second

// lookupListenIP resolves a DNS listen address's name; a variable for
// tests.
var lookupListenIP = func(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// listensOnLoopback reports whether listen address s reaches loopback
// only (ListensBeyondLoopback).
func listensOnLoopback(s string) bool {
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return false
	}
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_IP6ZONE:
			continue // the address follows
		case ma.P_IP4, ma.P_IP6:
			ip, ok := netip.AddrFromSlice(c.RawValue())
			return ok && ip.Unmap().IsLoopback()
		case ma.P_DNS, ma.P_DNS4, ma.P_DNS6:
			network := map[int]string{ma.P_DNS: "ip", ma.P_DNS4: "ip4", ma.P_DNS6: "ip6"}[c.Protocol().Code]
			ctx, cancel := context.WithTimeout(context.Background(), listenLookupTimeout)
			defer cancel()
			ips, err := lookupListenIP(ctx, network, c.Value())
			if err != nil || len(ips) == 0 {
				return false
			}
			for _, ip := range ips {
				if !ip.Unmap().IsLoopback() {
					return false
				}
			}
			return true
		}
		return false
	}
	return false
}

// ErrPortInUse reports a listen address whose port another process holds.
var ErrPortInUse = errors.New("port already in use")

// checkListenPorts refuses listen addresses whose fixed port another
// socket already holds. go-libp2p binds its TCP and QUIC listeners with
// SO_REUSEPORT (which TCP hole punching needs), so a second node on the
// same port starts without error, shares the port with the first, and the
// kernel hands each incoming connection to either node: dials reach the
// wrong node at random. A plain bind (without SO_REUSEPORT) of the same
// address fails when any socket holds it, which tells the two apart
// before the host starts. Port 0 (any free port) is never checked.
func checkListenPorts(listen []string) error {
	for _, s := range listen {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return fmt.Errorf("listen address %q: %w", s, err)
		}
		// Only the transport part matters: /ip4/A/tcp/P or /ip4/A/udp/P.
		network, addr, err := manet.DialArgs(m)
		if err != nil {
			continue // not an IP address (e.g. a relay address): nothing to check
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil || port == "0" {
			continue
		}
		switch network {
		case "tcp", "tcp4", "tcp6":
			l, err := net.Listen(network, addr)
			if err != nil {
				return portErr(s, err)
			}
			l.Close()
		case "udp", "udp4", "udp6":
			c, err := net.ListenPacket(network, addr)
			if err != nil {
				return portErr(s, err)
			}
			c.Close()
		}
	}
	return nil
}

func portErr(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: %w (another acaptcha or libp2p node, e.g. IPFS on 4001, holds it; choose another --listen port)", addr, ErrPortInUse)
	}
	return fmt.Errorf("listen on %s: %w", addr, err)
}
