// Package proto_test holds the wire types' conformance to the specs: every
// message and enum the three specifications print is compared, field by
// field, with the generated descriptors, so a drifted name, number or type
// fails here before it reaches the wire.
package proto_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/regroup-mls/regroup/proto/apipb"
	_ "github.com/regroup-mls/regroup/proto/backendpb"
	_ "github.com/regroup-mls/regroup/proto/contentspb"
	_ "github.com/regroup-mls/regroup/proto/identitypb"
)

// field is one printed field: its name, number and type as the spec text
// writes it ("bytes", "uint64", "string", or a message or enum full name;
// a "repeated " prefix for lists).
type field struct {
	name   string
	number protoreflect.FieldNumber
	typ    string
	oneof  string // the oneof the spec places the field in, if any
}

// printedMessages is transcribed from the spec texts: fork-recovery.txt
// sections 2 and 6, joining-groups.txt sections 1, 4, 5 and 6, and the
// companion definitions (docs/companion-spec.md) for the project's own.
var printedMessages = map[protoreflect.FullName][]field{
	// fork-recovery.txt section 2.
	"xmtp.backend.v1.SealedCommitLogEntry": {
		{"commit_log_id", 1, "bytes", ""},
		{"nonce", 2, "bytes", ""},
		{"ciphertext", 3, "bytes", ""},
		{"signature", 4, "bytes", ""},
	},
	"xmtp.mls.message_contents.PlaintextCommitLogEntry": {
		{"group_id", 1, "bytes", ""},
		{"commit_sequence_id", 2, "uint64", ""},
		{"last_epoch_authenticator", 3, "bytes", ""},
		{"commit_result", 4, "xmtp.mls.message_contents.CommitResult", ""},
		{"applied_epoch_number", 5, "uint64", ""},
		{"applied_epoch_authenticator", 6, "bytes", ""},
		{"author_installation_key", 7, "bytes", ""},
		{"author_signature", 8, "bytes", ""},
	},
	// fork-recovery.txt section 6.
	"xmtp.mls.message_contents.OneshotMessage": {
		{"readd_request", 1, "xmtp.mls.message_contents.ReaddRequest", "message_type"},
	},
	"xmtp.mls.message_contents.ReaddRequest": {
		{"group_id", 1, "bytes", ""},
		{"latest_commit_sequence_id", 2, "uint64", ""},
	},
	// joining-groups.txt section 1.
	"xmtp.mls.api.v1.KeyPackage": {
		{"key_package_tls_serialized", 1, "bytes", ""},
	},
	"xmtp.mls.message_contents.MlsCredential": {
		{"inbox_id", 1, "string", ""},
	},
	"xmtp.mls.message_contents.WelcomeWrapperEncryption": {
		{"pub_key", 1, "bytes", ""},
		{"algorithm", 2, "xmtp.mls.message_contents.WelcomeWrapperAlgorithm", ""},
	},
	"xmtp.mls.message_contents.WelcomePointeeEncryptionAeadTypesExtension": {
		{"supported_aead_types", 1, "repeated xmtp.mls.message_contents.WelcomePointeeEncryptionAeadType", ""},
	},
	// joining-groups.txt section 4.
	"xmtp.mls.api.v1.WelcomeMessage": {
		{"v1", 1, "xmtp.mls.api.v1.WelcomeMessage.V1", "version"},
		{"welcome_pointer", 2, "xmtp.mls.api.v1.WelcomeMessage.WelcomePointer", "version"},
	},
	"xmtp.mls.api.v1.WelcomeMessage.V1": {
		{"installation_key", 1, "bytes", ""},
		{"data", 2, "bytes", ""},
		{"hpke_public_key", 3, "bytes", ""},
		{"wrapper_algorithm", 4, "xmtp.mls.message_contents.WelcomeWrapperAlgorithm", ""},
		{"welcome_metadata", 5, "bytes", ""},
	},
	"xmtp.mls.api.v1.WelcomeMessage.WelcomePointer": {
		{"installation_key", 1, "bytes", ""},
		{"welcome_pointer", 2, "bytes", ""},
		{"hpke_public_key", 3, "bytes", ""},
		{"wrapper_algorithm", 4, "xmtp.mls.message_contents.WelcomePointerWrapperAlgorithm", ""},
	},
	// joining-groups.txt section 5.
	"xmtp.mls.message_contents.WelcomePointer": {
		{"welcome_v1_pointer", 1, "xmtp.mls.message_contents.WelcomePointer.WelcomeV1Pointer", "version"},
	},
	"xmtp.mls.message_contents.WelcomePointer.WelcomeV1Pointer": {
		{"destination", 1, "bytes", ""},
		{"aead_type", 2, "xmtp.mls.message_contents.WelcomePointeeEncryptionAeadType", ""},
		{"encryption_key", 3, "bytes", ""},
		{"data_nonce", 4, "bytes", ""},
		{"welcome_metadata_nonce", 5, "bytes", ""},
	},
	// joining-groups.txt section 6.
	"xmtp.mls.message_contents.WelcomeMetadata": {
		{"message_cursor", 1, "uint64", ""},
	},
	// Companion definitions (DESIGN.md, docs/companion-spec.md).
	"xmtp.backend.v1.CommitLogEntryTBS": {
		{"topic", 1, "bytes", ""},
		{"nonce", 2, "bytes", ""},
		{"ciphertext", 3, "bytes", ""},
	},
	"xmtp.mls.message_contents.GroupMembershipEntry": {
		{"v1", 1, "xmtp.mls.message_contents.GroupMembershipEntry.V1", "version"},
	},
	"xmtp.mls.message_contents.GroupMembershipEntry.V1": {
		{"sequence_id", 1, "uint64", ""},
		{"failed_installations", 2, "repeated bytes", ""},
	},
	"xmtp.mls.message_contents.DmMembers": {
		{"dm_member_one", 1, "xmtp.mls.message_contents.Inbox", ""},
		{"dm_member_two", 2, "xmtp.mls.message_contents.Inbox", ""},
	},
	"xmtp.mls.message_contents.Inbox": {
		{"inbox_id", 1, "string", ""},
	},
}

// printedEnums is transcribed from the same texts: value name to number.
var printedEnums = map[protoreflect.FullName]map[string]protoreflect.EnumNumber{
	"xmtp.mls.message_contents.CommitResult": {
		"COMMIT_RESULT_UNSPECIFIED":   0,
		"COMMIT_RESULT_APPLIED":       1,
		"COMMIT_RESULT_WRONG_EPOCH":   2,
		"COMMIT_RESULT_UNDECRYPTABLE": 3,
		"COMMIT_RESULT_INVALID":       4,
	},
	"xmtp.mls.message_contents.WelcomeWrapperAlgorithm": {
		"WELCOME_WRAPPER_ALGORITHM_UNSPECIFIED":             0,
		"WELCOME_WRAPPER_ALGORITHM_CURVE25519":              1,
		"WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6": 2,
		"WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY":           3,
	},
	"xmtp.mls.message_contents.WelcomePointeeEncryptionAeadType": {
		"WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_UNSPECIFIED":       0,
		"WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305": 3,
	},
	"xmtp.mls.message_contents.WelcomePointerWrapperAlgorithm": {
		"WELCOME_POINTER_WRAPPER_ALGORITHM_UNSPECIFIED":             0,
		"WELCOME_POINTER_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6": 2,
	},
}

// typeName renders a field descriptor in the spec's notation.
func typeName(fd protoreflect.FieldDescriptor) string {
	var t string
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		t = string(fd.Message().FullName())
	case protoreflect.EnumKind:
		t = string(fd.Enum().FullName())
	default:
		t = fd.Kind().String()
	}
	if fd.Cardinality() == protoreflect.Repeated {
		t = "repeated " + t
	}
	return t
}

// TestPrintedMessagesMatchDescriptors compares every printed message with
// its generated descriptor: the same fields, numbers, types and oneofs, and
// no field the spec does not print.
func TestPrintedMessagesMatchDescriptors(t *testing.T) {
	for name, want := range printedMessages {
		t.Run(string(name), func(t *testing.T) {
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
			if err != nil {
				t.Fatalf("message %s is not generated: %v", name, err)
			}
			md, ok := d.(protoreflect.MessageDescriptor)
			if !ok {
				t.Fatalf("%s is a %T, want a message", name, d)
			}
			if got := md.Fields().Len(); got != len(want) {
				t.Errorf("%s has %d fields, the spec prints %d", name, got, len(want))
			}
			for _, f := range want {
				fd := md.Fields().ByName(protoreflect.Name(f.name))
				if fd == nil {
					t.Errorf("field %s.%s is missing", name, f.name)
					continue
				}
				if fd.Number() != f.number {
					t.Errorf("field %s.%s has number %d, the spec prints %d", name, f.name, fd.Number(), f.number)
				}
				if got := typeName(fd); got != f.typ {
					t.Errorf("field %s.%s has type %s, the spec prints %s", name, f.name, got, f.typ)
				}
				var oneof string
				if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
					oneof = string(od.Name())
				}
				if oneof != f.oneof {
					t.Errorf("field %s.%s is in oneof %q, the spec places it in %q", name, f.name, oneof, f.oneof)
				}
			}
		})
	}
}

// TestPrintedEnumsMatchDescriptors compares every printed enum with its
// generated descriptor, value by value.
func TestPrintedEnumsMatchDescriptors(t *testing.T) {
	for name, want := range printedEnums {
		t.Run(string(name), func(t *testing.T) {
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
			if err != nil {
				t.Fatalf("enum %s is not generated: %v", name, err)
			}
			ed, ok := d.(protoreflect.EnumDescriptor)
			if !ok {
				t.Fatalf("%s is a %T, want an enum", name, d)
			}
			if got := ed.Values().Len(); got != len(want) {
				t.Errorf("%s has %d values, the spec prints %d", name, got, len(want))
			}
			for vname, num := range want {
				vd := ed.Values().ByName(protoreflect.Name(vname))
				if vd == nil {
					t.Errorf("value %s.%s is missing", name, vname)
					continue
				}
				if vd.Number() != num {
					t.Errorf("value %s.%s has number %d, the spec prints %d", name, vname, vd.Number(), num)
				}
			}
		})
	}
}
