// Package keyschedule implements the MLS key schedule of RFC 9420 §8: the
// chain from init_secret, commit_secret and psk_secret through joiner,
// welcome and epoch secrets to the secrets of an epoch ([Epoch]), the
// exporter (§8.5), external_pub (§8.3), the PSK secret (§8.4), the
// confirmation tag and the confirmed and interim transcript hashes (§8.2).
//
// # Use
//
// A member that processes a commit calls [Derive] with the previous epoch's
// init_secret, the commit_secret and the psk_secret and the new encoded
// GroupContext; a joiner calls [FromJoiner] with the joiner_secret of its
// Welcome. [PSKSecret] combines pre-shared keys in the order of the commit.
//
// # Errors
//
// Inputs of the wrong length fail with an error wrapping
// ciphersuite.ErrInvalidKey or ciphersuite.ErrInvalidLength; nothing panics.
package keyschedule
