// Package ciphersuite provides the cryptographic operations of RFC 9420 §5
// for the cipher suites regroup supports.
//
// # Suites
//
// Suites are rows of one table (see suites.go): 0x0001
// MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519, 0x0002
// MLS_128_DHKEMP256_AES128GCM_SHA256_P256, 0x0003
// MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519, 0x0004
// MLS_256_DHKEMX448_AES256GCM_SHA512_Ed448, 0x0005
// MLS_256_DHKEMP521_AES256GCM_SHA512_P521, 0x0006
// MLS_256_DHKEMX448_CHACHA20POLY1305_SHA512_Ed448 and 0x0007
// MLS_256_DHKEMP384_AES256GCM_SHA384_P384: every suite of RFC 9420 §17.1.
// regroup's groups use 0x0003; the others let every IETF vector run and
// let regroup join groups of other clients. X448, its HPKE KEM and Ed448
// (pure, empty context) come from cloudflare/circl, as the standard
// library lacks them; everything else is the standard library's. Adding a
// suite whose primitives exist means adding a row. [Lookup] returns a [Suite] or an
// error wrapping [ErrUnsupportedSuite].
//
// # Operations
//
// A [Suite] offers the primitives (Hash, MAC, Extract, Expand, AEAD Seal and
// Open, HPKE, signatures) and the labeled MLS functions built on them:
// [Suite.ExpandWithLabel], [Suite.DeriveSecret], [Suite.DeriveTreeSecret],
// [Suite.SignWithLabel], [Suite.VerifyWithLabel], [Suite.EncryptWithLabel],
// [Suite.DecryptWithLabel], [Suite.RefHash], [Suite.MakeKeyPackageRef] and
// [Suite.MakeProposalRef]. Labels are passed without the "MLS 1.0 " prefix,
// which the functions add themselves, except for RefHash whose label is
// used as given (§5.2).
//
// # Errors
//
// Malformed keys, wrong key sizes, failed decryption and bad signatures are
// returned as errors wrapping [ErrInvalidKey], [ErrDecrypt] or
// [ErrBadSignature]; nothing panics on caller input.
package ciphersuite
