// Package message defines the MLS structures of RFC 9420 §§7–12 that are
// carried inside messages or extensions, with their exact TLS encoding:
// [Credential], [Capabilities], [Extension], [LeafNode], [KeyPackage],
// [ParentNode] and the [RatchetTree] extension, every [Proposal] type,
// [Commit] and [UpdatePath], [GroupContext], [GroupInfo], [GroupSecrets],
// [EncryptedGroupSecrets] and [Welcome].
//
// # Encoding
//
// Every structure implements [codec.Marshaler] and [codec.Unmarshaler]; use
// [codec.Marshal] and [codec.Unmarshal]. Decoding is strict (see package
// codec): a value that decodes re-encodes to exactly the same bytes.
// Decoding checks form only; whether a structure is acceptable (signatures,
// lifetimes, capabilities) is the job of the group engine.
//
// # Signatures
//
// [LeafNode], [KeyPackage] and [GroupInfo] can produce their to-be-signed
// encodings and sign and verify themselves with a cipher suite using the
// labels of §7.2, §10 and §12.4.3.
//
// # Errors
//
// A select over an enum value this package does not know (a credential,
// proposal, node or leaf-node-source type) fails with an error wrapping
// [ErrUnknownType], which itself wraps [codec.ErrInvalidValue].
package message
