package mcpserver

import ma "github.com/multiformats/go-multiaddr"

// PublicDialAddr exposes publicDialAddr to the tests.
func PublicDialAddr(a ma.Multiaddr) error { return publicDialAddr(a) }
