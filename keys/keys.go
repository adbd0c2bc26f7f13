// Package keys makes API key secrets and node tokens, and hashes them.
//
// A secret looks like "wk-" followed by 40 base62 characters (about 238
// bits from crypto/rand). It is shown to its owner once, at creation; the
// store keeps only its Prefix, to recognise the key in listings, and its
// Hash, to find the key when a request presents the secret.
//
// A node token (GenerateNodeToken) is made and kept the same way, with
// "wn-" in place of "wk-": an edge node presents it when it dials in, and
// the store finds the node by its Hash (weir.NodeStore.NodeByHash). The
// two prefixes keep a key from being mistaken for a token, by people, by
// secret scanners and by the code that reads either.
//
// Why no constant-time comparison: a request's secret is never compared
// with a stored secret. It is hashed with SHA-256 and the hash is looked up
// in an index (weir.Store.KeyByHash). Whatever a timing side channel of
// that lookup could leak is about the hash of the attacker's own guess,
// and knowing some bytes of a stored hash does not help anyone find a
// secret that produces it (SHA-256 is preimage resistant), nor does it
// narrow a 238-bit search. crypto/subtle matters when a secret value is
// compared byte by byte with attacker-controlled input; here the
// attacker-controlled input is hashed first.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

const (
	// SecretPrefix starts every secret, so that a leaked one is easy to
	// recognise (by people and by secret scanners).
	SecretPrefix = "wk-"
	// NodeTokenPrefix starts every node token, for the same reason.
	NodeTokenPrefix = "wn-"
	// secretChars is the number of random base62 characters after
	// SecretPrefix or NodeTokenPrefix.
	secretChars = 40
	// PrefixLen is the length of the prefix kept to recognise a key or a
	// node: SecretPrefix (or NodeTokenPrefix) and the first 7 random
	// characters.
	PrefixLen = 10
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Generate makes a new API key secret and returns it with its prefix
// (the first PrefixLen characters) and its hash (Hash(secret)). The error
// is non-nil only if the system's random source fails.
func Generate() (secret, prefix, hash string, err error) {
	secret, err = generate(SecretPrefix)
	if err != nil {
		return "", "", "", fmt.Errorf("generate key secret: %w", err)
	}
	return secret, secret[:PrefixLen], Hash(secret), nil
}

// GenerateNodeToken makes a new node token and returns it with its prefix
// (the first PrefixLen characters) and its hash (Hash(token)). The error
// is non-nil only if the system's random source fails.
func GenerateNodeToken() (token, prefix, hash string, err error) {
	token, err = generate(NodeTokenPrefix)
	if err != nil {
		return "", "", "", fmt.Errorf("generate node token: %w", err)
	}
	return token, token[:PrefixLen], Hash(token), nil
}

// NewID is prefix and 12 random hex digits: the public id of a key
// ("key_") or a node (weir.NodeIDPrefix), not a secret. The error is
// non-nil only if the system's random source fails.
func NewID(prefix string) (string, error) {
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return prefix + hex.EncodeToString(id[:]), nil
}

// generate returns start followed by secretChars random base62
// characters.
func generate(start string) (string, error) {
	out := make([]byte, 0, len(start)+secretChars)
	out = append(out, start...)
	// Rejection sampling: a byte below 248 (= 4 × 62) maps onto base62
	// without bias; the others are dropped. About 3% are dropped, so one
	// read of 48 bytes nearly always suffices.
	var buf [48]byte
	for len(out) < cap(out) {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", err
		}
		for _, b := range buf {
			if b >= 248 {
				continue
			}
			out = append(out, base62[b%62])
			if len(out) == cap(out) {
				break
			}
		}
	}
	return string(out), nil
}

// Hash returns the hex SHA-256 of a secret or a node token: what the
// store keeps and looks keys and nodes up by. A plain, unsalted hash is
// right here because both are long random strings, not passwords: there
// is nothing to brute-force and the lookup must be by hash.
func Hash(secret string) string {
	var b [2 * sha256.Size]byte
	return string(AppendHash(b[:0], secret))
}

// AppendHash appends Hash(secret) to b.
func AppendHash(b []byte, secret string) []byte {
	sum := Sum(secret)
	return hex.AppendEncode(b, sum[:])
}

// Sum is the SHA-256 of secret, whose hex is Hash(secret). A secret of up
// to 128 bytes (a key's or a node token's) is copied for hashing on the
// stack rather than the heap: it runs on every request.
func Sum(secret string) [sha256.Size]byte {
	var buf [128]byte
	return sha256.Sum256(append(buf[:0], secret...))
}
