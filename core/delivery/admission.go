package delivery

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/internal/edkey"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// KeyPackageValidator decides whether a published key package may be
// stored. The MLS engine provides it: it parses the package and applies
// JOIN-090 (and whatever else the deployment checks at admission).
type KeyPackageValidator interface {
	// ValidateKeyPackage returns nil when the TLS-serialized key package
	// parses, passes JOIN-090 and names installationKey as its leaf's
	// signature key; any error refuses the package and its text is the
	// reason given to the publisher.
	ValidateKeyPackage(ctx context.Context, installationKey, keyPackageTLS []byte) error
}

// invalid returns an error wrapping ports.ErrInvalidArgument with reason.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ports.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// ParseTopic splits a topic into its kind and identifier and checks the
// identifier length of the kind (TOPIC-001, TOPIC-002): 16 or 32 bytes for
// group messages and GroupInfo (both named by the group id), 32 for every
// other kind. It fails with an error wrapping
// [ports.ErrInvalidArgument] naming what is wrong.
func ParseTopic(topic []byte) (ports.TopicKind, []byte, error) {
	if len(topic) == 0 {
		return 0, nil, invalid("empty topic")
	}
	kind, id := ports.TopicKind(topic[0]), topic[1:]
	switch kind {
	case ports.TopicGroupMessages, ports.TopicGroupInfo:
		if len(id) != 16 && len(id) != 32 {
			return 0, nil, invalid("topic kind 0x%02x identifier is %d bytes, want 16 or 32 (a group id)", byte(kind), len(id))
		}
	case ports.TopicWelcomes, ports.TopicIdentityUpdates, ports.TopicKeyPackages, ports.TopicCommitLog:
		if len(id) != 32 {
			return 0, nil, invalid("topic kind 0x%02x identifier is %d bytes, want 32", byte(kind), len(id))
		}
	default:
		return 0, nil, invalid("unknown topic kind 0x%02x", byte(kind))
	}
	return kind, id, nil
}

// PublishTBS returns the bytes the publish signature of a sealed
// commit-log entry covers on topic (companion definitions: publish
// signature): CommitLogEntryTBS{topic, nonce, ciphertext} with each
// non-default field once in ascending field-number order.
func PublishTBS(topic, nonce, ciphertext []byte) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(&backendpb.CommitLogEntryTBS{
		Topic: topic, Nonce: nonce, Ciphertext: ciphertext,
	})
}

// VerifyPublishSignature reports whether entry's signature is an
// Ed25519ctx signature with context [ports.PublishContext] over its
// CommitLogEntryTBS on topic, under the 32-byte commit_log_id it carries
// (API-230, API-300).
func VerifyPublishSignature(topic []byte, entry *backendpb.SealedCommitLogEntry) bool {
	if !edkey.Usable(entry.GetCommitLogId()) || len(entry.GetSignature()) != ed25519.SignatureSize {
		return false
	}
	tbs, err := PublishTBS(topic, entry.GetNonce(), entry.GetCiphertext())
	if err != nil {
		return false
	}
	return ed25519.VerifyWithOptions(ed25519.PublicKey(entry.GetCommitLogId()), tbs, entry.GetSignature(),
		&ed25519.Options{Context: ports.PublishContext}) == nil
}

// admit checks one envelope against its topic and returns the topic's
// kind, or an error wrapping ports.ErrInvalidArgument with the reason.
func (s *Service) admit(ctx context.Context, env *backendpb.ClientEnvelope) (ports.TopicKind, error) {
	if env == nil {
		return 0, because(RefusedPayload, invalid("nil envelope"))
	}
	if n := proto.Size(env); n > s.opts.MaxEnvelopeBytes {
		return 0, because(RefusedEnvelopeSize, invalid("envelope is %d bytes, limit %d", n, s.opts.MaxEnvelopeBytes))
	}
	topic := env.GetTargetTopic()
	kind, id, err := ParseTopic(topic)
	if err != nil {
		return 0, because(RefusedTopic, err)
	}
	want := map[ports.TopicKind]string{
		ports.TopicGroupMessages:   "group_message",
		ports.TopicGroupInfo:       "group_message",
		ports.TopicWelcomes:        "welcome_message",
		ports.TopicIdentityUpdates: "identity_update",
		ports.TopicKeyPackages:     "key_package",
		ports.TopicCommitLog:       "sealed_commit_log_entry",
	}[kind]
	mismatch := func(got string) error {
		return invalid("topic kind 0x%02x takes a %s payload, got %s", byte(kind), want, got)
	}
	switch p := env.GetPayload().(type) {
	case nil:
		if len(env.ProtoReflect().GetUnknown()) > 0 {
			return 0, because(RefusedPayload, invalid("envelope has an unknown payload (a field this service does not know)"))
		}
		return 0, because(RefusedPayload, invalid("envelope has no payload"))
	case *backendpb.ClientEnvelope_GroupMessage:
		// A GroupInfo is an MLSMessage too, carried as a group_message.
		if kind != ports.TopicGroupMessages && kind != ports.TopicGroupInfo {
			return 0, because(RefusedPayload, mismatch("group_message"))
		}
		if len(p.GroupMessage) == 0 {
			return 0, because(RefusedPayload, invalid("empty group_message"))
		}
		if kind == ports.TopicGroupInfo && !isGroupInfo(p.GroupMessage) {
			// COMP-372: a GroupInfo topic carries MLSMessages of wire
			// format group_info only.
			return 0, because(RefusedPayload, invalid("a group-info topic takes an MLSMessage of wire format group_info"))
		}
	case *backendpb.ClientEnvelope_WelcomeMessage:
		if kind != ports.TopicWelcomes {
			return 0, because(RefusedPayload, mismatch("welcome_message"))
		}
		return kind, because(RefusedWelcome, admitWelcome(id, p.WelcomeMessage))
	case *backendpb.ClientEnvelope_IdentityUpdate:
		if kind != ports.TopicIdentityUpdates {
			return 0, because(RefusedPayload, mismatch("identity_update"))
		}
		u := p.IdentityUpdate
		if u == nil || len(u.GetRecoveryPublicKey()) != ed25519.PublicKeySize {
			return 0, because(RefusedIdentityUpdate, invalid("identity_update recovery_public_key must be %d bytes", ed25519.PublicKeySize))
		}
		sum := sha256.Sum256(u.GetRecoveryPublicKey())
		if !bytes.Equal(sum[:], id) || u.GetInboxId() != hex.EncodeToString(sum[:]) {
			return 0, because(RefusedIdentityUpdate, invalid("identity_update inbox id is not SHA-256 of its recovery key or does not match the topic"))
		}
		if u.GetAction() == nil {
			return 0, because(RefusedIdentityUpdate, invalid("identity_update has no action"))
		}
		if err := admitIdentityUpdate(u); err != nil {
			return 0, because(RefusedIdentityUpdate, err)
		}
	case *backendpb.ClientEnvelope_KeyPackage:
		if kind != ports.TopicKeyPackages {
			return 0, because(RefusedPayload, mismatch("key_package"))
		}
		kp := p.KeyPackage.GetKeyPackageTlsSerialized()
		if len(kp) == 0 {
			return 0, because(RefusedPayload, invalid("empty key_package"))
		}
		if s.opts.KeyPackageValidator != nil {
			if err := s.opts.KeyPackageValidator.ValidateKeyPackage(ctx, id, kp); err != nil {
				// JOIN-090: the backend rejects an unusable key package at admission.
				return 0, because(RefusedKeyPackage, invalid("key package refused: %v", err))
			}
		}
	case *backendpb.ClientEnvelope_SealedCommitLogEntry:
		if kind != ports.TopicCommitLog {
			return 0, because(RefusedPayload, mismatch("sealed_commit_log_entry"))
		}
		e := p.SealedCommitLogEntry
		if !bytes.Equal(e.GetCommitLogId(), id) {
			return 0, because(RefusedSignature, invalid("sealed_commit_log_entry commit_log_id does not name its topic"))
		}
		if !VerifyPublishSignature(topic, e) {
			return 0, because(RefusedSignature, invalid("sealed_commit_log_entry publish signature does not verify under its commit_log_id"))
		}
	default:
		return 0, because(RefusedPayload, invalid("unknown payload %T", p))
	}
	return kind, nil
}

func admitWelcome(id []byte, w *apipb.WelcomeMessage) error {
	switch v := w.GetVersion().(type) {
	case *apipb.WelcomeMessage_V1_:
		if !bytes.Equal(v.V1.GetInstallationKey(), id) {
			return invalid("welcome installation_key does not match its topic")
		}
		if len(v.V1.GetData()) == 0 {
			return invalid("welcome has no data")
		}
	case *apipb.WelcomeMessage_WelcomePointer_:
		if !bytes.Equal(v.WelcomePointer.GetInstallationKey(), id) {
			return invalid("welcome pointer installation_key does not match its topic")
		}
		if len(v.WelcomePointer.GetWelcomePointer()) == 0 {
			return invalid("welcome pointer has no welcome_pointer")
		}
	default:
		return invalid("welcome_message has no version")
	}
	return nil
}

// admitIdentityUpdate refuses an identity update whose signatures or shape
// fail [identity.VerifyUpdate] (COMP-071): readers would ignore it, so
// storing it would only serve an update nobody can use.
func admitIdentityUpdate(u *identitypb.IdentityUpdate) error {
	if err := identity.VerifyUpdate(u); err != nil {
		return invalid("identity_update refused: %v", err)
	}
	return nil
}

// admitPublisher refuses a key package published by a connection whose
// installation key is not the key-package topic's identifier (COMP-126):
// only an installation publishes its own key packages, so nobody else can
// make an old package of it the newest one served.
func admitPublisher(caller ports.Caller, env *backendpb.ClientEnvelope) error {
	if _, ok := env.GetPayload().(*backendpb.ClientEnvelope_KeyPackage); !ok {
		return nil
	}
	topic := env.GetTargetTopic()
	if len(topic) == 0 || ports.TopicKind(topic[0]) != ports.TopicKeyPackages {
		return nil // admit reports the mismatch
	}
	if !bytes.Equal(caller.InstallationKey, topic[1:]) {
		return invalid("key package published by installation %x on the topic of installation %x: only an installation publishes its own key packages",
			caller.InstallationKey, topic[1:])
	}
	return nil
}
