package keypackage

// Extension, component and value identifiers a key package carries
// (COMP-010, COMP-011).
const (
	// ExtAppDataDictionary is the app_data_dictionary extension
	// (draft-ietf-mls-extensions), which carries every group metadata
	// component in the group context and the last-resort mark in a key
	// package.
	ExtAppDataDictionary uint16 = 0x0006
	// ExtWelcomeWrapperEncryption is the key-package extension holding a
	// WelcomeWrapperEncryption.
	ExtWelcomeWrapperEncryption uint16 = 0xff03
	// ExtPointeeAEADTypes is the key-package extension holding a
	// WelcomePointeeEncryptionAeadTypesExtension.
	ExtPointeeAEADTypes uint16 = 0xff04
	// ComponentLastResort is the last_resort_key_package component of the
	// app_data_dictionary; its data is empty (JOIN-082).
	ComponentLastResort uint16 = 0x0004
	// CipherSuite is the only suite an installation publishes under and a
	// sender accepts (JOIN-072).
	CipherSuite uint16 = 0x0003
)

// CapabilityExtensions returns the extension types a key package lists in
// its leaf node's capabilities (JOIN-002, COMP-125): exactly the
// non-default ones regroup's engine and client process —
// [ExtAppDataDictionary] (the engine carries it in the group context and
// changes it by GroupContextExtensions; the client reads metadata from
// it), [ExtWelcomeWrapperEncryption] and [ExtPointeeAEADTypes] (the client
// reads them to wrap, unwrap and choose welcome pointers). The client
// reuses this list when it checks what a group requires of its members.
func CapabilityExtensions() []uint16 {
	return []uint16{ExtAppDataDictionary, ExtWelcomeWrapperEncryption, ExtPointeeAEADTypes}
}

// CapabilityProposals returns the non-default proposal types a key package
// lists: none, since the engine processes only RFC 9420's default proposals
// (AppDataUpdate is not advertised because nothing processes it).
func CapabilityProposals() []uint16 { return []uint16{} }
