package peer

// Discovery: bootstrap peers, mDNS, DHT rendezvous. Placeholder.

type discoveryState struct{}

func (n *Node) startDiscovery() error { return nil }
func (n *Node) stopDiscovery()        {}
