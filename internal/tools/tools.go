//go:build tools

// Package tools pins the versions of the modules acaptcha builds on, so that
// go mod tidy keeps them while packages are being written.
package tools

import (
	_ "github.com/libp2p/go-libp2p"
	_ "github.com/libp2p/go-libp2p-kad-dht"
	_ "github.com/libp2p/go-libp2p-pubsub"
	_ "github.com/libp2p/go-libp2p/core/record"
	_ "github.com/libp2p/go-libp2p/x/simlibp2p"
	_ "github.com/libp2p/go-msgio/pbio"
	_ "github.com/multiformats/go-multiaddr"
	_ "github.com/spf13/cobra"
	_ "github.com/tmc/langchaingo/llms/anthropic"
	_ "github.com/tmc/langchaingo/llms/googleai"
	_ "github.com/tmc/langchaingo/llms/ollama"
	_ "github.com/tmc/langchaingo/llms/openai"
	_ "go.etcd.io/bbolt"
	_ "go.uber.org/goleak"
	_ "golang.org/x/text/cases"
	_ "gonum.org/v1/plot"
	_ "google.golang.org/protobuf/proto"
)
