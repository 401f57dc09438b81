package main

import (
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/httpgw"
)

// startHTTPDoor serves the node's HTTP door (peer/httpgw, spec/http.md)
// on addr when it is set; it returns the door's URL and how to stop it
// (before the node closes: sessions in flight end first).
func (a *app) startHTTPDoor(n *peer.Node, addr string) (string, func(), error) {
	if addr == "" {
		return "", func() {}, nil
	}
	gw, err := httpgw.ForNode(n.Door(), httpgw.Config{Logger: a.log})
	if err != nil {
		return "", nil, usageErr("--http: %v", err)
	}
	bound, err := gw.Listen(addr)
	if err != nil {
		_ = gw.Close()
		return "", nil, usageErr("--http: %v", err)
	}
	return "http://" + bound.String(), func() { _ = gw.Close() }, nil
}
