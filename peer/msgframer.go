package peer

import (
	"errors"
	"math"
)

// msgFramer follows, as a stream's bytes are read, the varint-delimited
// messages of libp2p's msgio readers, which take a buffer of the length a
// message's prefix announces before any of the message arrives. The DHT's
// inbound requests (dhtRequestStream), its replies to our queries and
// GossipSub's RPCs (largeMsgStream) are read through one, so that a
// prefix is acted on before the reader behind sees it.
type msgFramer struct {
	rest  uint64 // bytes left of the current message
	size  uint64 // the prefix read so far
	shift uint
}

// errMalformedPrefix is a length prefix of more than ten bytes.
var errMalformedPrefix = errors.New("malformed length prefix")

// errPrefixOver is a length prefix announcing more than feed's atMost.
var errPrefixOver = errors.New("length prefix over the bound")

// feed follows p, the bytes just read. It returns errPrefixOver as soon
// as a prefix read so far announces more than atMost (math.MaxUint64:
// no bound), errMalformedPrefix for a prefix over ten bytes, or the
// error of prefix, which is called with each complete prefix's size;
// done is called when a message's last byte is read (not for an empty
// message). After an error the framer is not fed again.
func (f *msgFramer) feed(p []byte, atMost uint64, prefix func(size uint64) error, done func()) error {
	for i := 0; i < len(p); i++ {
		if f.rest > 0 {
			skip := min(f.rest, uint64(len(p)-i))
			f.rest -= skip
			i += int(skip) - 1
			if f.rest == 0 && done != nil {
				done()
			}
			continue
		}
		if f.shift > 63 {
			return errMalformedPrefix
		}
		b := p[i]
		f.size |= uint64(b&0x7f) << f.shift
		f.shift += 7
		if atMost != math.MaxUint64 && f.size > atMost {
			return errPrefixOver
		}
		if b&0x80 != 0 {
			continue
		}
		size := f.size
		f.rest, f.size, f.shift = size, 0, 0
		if prefix != nil {
			if err := prefix(size); err != nil {
				return err
			}
		}
	}
	return nil
}
