// Package gsi is the wire format of XRootD's "gsi" security protocol as
// XrdCl 5's libXrdSecgsi speaks it: X.509 proxy authentication inside
// kXR_auth. Each step is a buffer of typed buckets (XrdSutBuffer); the
// server proves its host certificate by signing the client's random tag,
// the two sides agree a session key by Diffie-Hellman, and the client
// sends its proxy chain encrypted with that key, with the server's random
// tag signed by the proxy key as proof of possession.
package gsi

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the protocol version hepcache announces and speaks: 10400,
// where each side signs its DH public part (the server with its host key,
// the client with its proxy key), pads the DH secret and sends a random IV
// with the encrypted buffer. A 5.x client follows the version the server
// announces, a 5.x server the version the client sends. As a client,
// hepcache also speaks 10300 (unsigned DH) to servers announcing less.
const Version = 10400

// versionDHSigned is the first version signing the DH public parts.
const versionDHSigned = 10400

// protoID is the protocol name that opens every buffer.
const protoID = "gsi"

// Steps. Client steps are 1000+, server steps 2000+. ONLY APPEND.
const (
	stepCertReq = 1000 // client: asks for the server certificate
	stepCert    = 1001 // client: its proxy chain, encrypted
	stepSigPxy  = 1002 // client: a signed delegated proxy (not supported)

	stepInit    = 2000 // server: the parameters of the login answer
	stepSrvCert = 2001 // server: its certificate and DH public part
	stepPxyReq  = 2002 // server: asks for a delegated proxy (not used)
)

// Bucket types (XrdSutAux.hh kXRS_*). ONLY APPEND.
const (
	bkNone       = 0
	bkInactive   = 1
	bkCryptoMod  = 3000
	bkMain       = 3001
	bkPuk        = 3004
	bkCipher     = 3005
	bkRtag       = 3006
	bkSignedRtag = 3007
	bkUser       = 3008
	bkMessage    = 3011
	bkVersion    = 3014
	bkClntOpts   = 3019
	bkX509       = 3022
	bkIssuerHash = 3023
	bkCipherAlg  = 3025
	bkMDAlg      = 3026
)

// maxBuckets bounds the buckets of one buffer (a real step has fewer
// than ten).
const maxBuckets = 32

// ErrMalformed marks a buffer that does not follow the protocol.
var ErrMalformed = errors.New("gsi: malformed buffer")

type bucket struct {
	typ  int32
	data []byte
}

// buffer is an XrdSutBuffer: "gsi\0", the step (int32), then buckets
// (type int32, length int32, bytes), closed by a bucket type 0. All
// integers are big-endian.
type buffer struct {
	step    int32
	buckets []bucket
}

// parseBuffer decodes b. The buckets alias b. It never panics (fuzzed).
func parseBuffer(b []byte) (*buffer, error) {
	bad := func(why string) (*buffer, error) { return nil, fmt.Errorf("%s: %w", why, ErrMalformed) }
	if len(b) < len(protoID)+1+4 || string(b[:len(protoID)+1]) != protoID+"\x00" {
		return bad("no \"gsi\" protocol header")
	}
	b = b[len(protoID)+1:]
	buf := &buffer{step: int32(binary.BigEndian.Uint32(b))}
	b = b[4:]
	for {
		if len(b) < 4 {
			return bad("buckets not terminated")
		}
		typ := int32(binary.BigEndian.Uint32(b))
		if typ == bkNone {
			return buf, nil
		}
		if len(b) < 8 {
			return bad("truncated bucket header")
		}
		n := binary.BigEndian.Uint32(b[4:])
		if uint64(n) > uint64(len(b)-8) {
			return bad(fmt.Sprintf("bucket %d of %d bytes overruns the buffer", typ, n))
		}
		if typ != bkInactive {
			if len(buf.buckets) == maxBuckets {
				return bad("too many buckets")
			}
			buf.buckets = append(buf.buckets, bucket{typ, b[8 : 8+n : 8+n]})
		}
		b = b[8+n:]
	}
}

// get returns the first bucket of type t, or nil.
func (b *buffer) get(t int32) []byte {
	for _, k := range b.buckets {
		if k.typ == t {
			return k.data
		}
	}
	return nil
}

// has reports whether a bucket of type t is present (it may be empty).
func (b *buffer) has(t int32) bool {
	for _, k := range b.buckets {
		if k.typ == t {
			return true
		}
	}
	return false
}

// set replaces the bucket of type t, or appends one.
func (b *buffer) set(t int32, data []byte) {
	for i := range b.buckets {
		if b.buckets[i].typ == t {
			b.buckets[i].data = data
			return
		}
	}
	b.buckets = append(b.buckets, bucket{t, data})
}

// del removes the buckets of type t.
func (b *buffer) del(t int32) {
	out := b.buckets[:0]
	for _, k := range b.buckets {
		if k.typ != t {
			out = append(out, k)
		}
	}
	b.buckets = out
}

// setInt stores a marshalled int32 (XrdSutBuffer::MarshalBucket).
func (b *buffer) setInt(t int32, v int32) {
	b.set(t, binary.BigEndian.AppendUint32(nil, uint32(v)))
}

// getInt returns a marshalled int32.
func (b *buffer) getInt(t int32) (int32, bool) {
	d := b.get(t)
	if len(d) != 4 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(d)), true
}

// marshal encodes b.
func (b *buffer) marshal() []byte {
	n := len(protoID) + 1 + 8
	for _, k := range b.buckets {
		n += 8 + len(k.data)
	}
	out := make([]byte, 0, n)
	out = append(out, protoID...)
	out = append(out, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(b.step))
	for _, k := range b.buckets {
		out = binary.BigEndian.AppendUint32(out, uint32(k.typ))
		out = binary.BigEndian.AppendUint32(out, uint32(len(k.data)))
		out = append(out, k.data...)
	}
	return binary.BigEndian.AppendUint32(out, bkNone)
}
