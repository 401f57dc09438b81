package secondimpl2

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
)

type ed25519PublicKey = ed25519.PublicKey

func ed25519FromSeed(seed []byte) ed25519.PrivateKey { return ed25519.NewKeyFromSeed(seed) }

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
