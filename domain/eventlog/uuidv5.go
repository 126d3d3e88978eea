package eventlog

import "crypto/sha1"

// UUIDv5 is the name-based UUID (RFC 9562 version 5, SHA-1) of name in namespace: the one derivation
// of every deterministic ID bookingledger stores (provider event IDs, link event IDs, step keys,
// EventStoreDB claims). It lives here, in the standard library's reach, so that the domain and the
// adapters derive with the same code; it returns the 16 bytes for callers to type (EventID,
// uuid.UUID).
func UUIDv5(namespace [16]byte, name []byte) [16]byte {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write(name)
	var id [16]byte
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x50
	id[8] = id[8]&0x3f | 0x80
	return id
}
