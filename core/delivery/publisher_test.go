package delivery

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

func identityEnvelope(t *testing.T, inboxID string, p *backendpb.ClientEnvelope_IdentityUpdate) *backendpb.ClientEnvelope {
	t.Helper()
	topic, err := identity.Topic(inboxID)
	if err != nil {
		t.Fatal(err)
	}
	return &backendpb.ClientEnvelope{TargetTopic: topic, Payload: p}
}

// COMP-071: identity updates are verified at admission — an update whose
// recovery or installation signature fails is refused with
// INVALID_ARGUMENT naming the signature, and nothing is stored.
func TestCOMP071_IdentityUpdatesVerifiedAtAdmission(t *testing.T) {
	svc := New(newMemStore(), withClock(nil))
	_, rsk, _ := ed25519.GenerateKey(nil)
	_, isk, _ := ed25519.GenerateKey(nil)
	good, err := identity.NewAdd(rsk, isk, 7)
	if err != nil {
		t.Fatal(err)
	}
	inbox := good.GetInboxId()
	pub := func(mutate func(e *backendpb.ClientEnvelope_IdentityUpdate)) error {
		t.Helper()
		u, _ := identity.NewAdd(rsk, isk, 7)
		p := &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u}
		mutate(p)
		_, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{identityEnvelope(t, inbox, p)})
		return err
	}
	if err := pub(func(*backendpb.ClientEnvelope_IdentityUpdate) {}); err != nil {
		t.Fatalf("a valid add was refused: %v", err)
	}
	topic, _ := identity.Topic(inbox)
	before, _ := svc.HighestSequenceID(ctx(t), authed, topic)
	for _, c := range []struct {
		name, reason string
		mutate       func(e *backendpb.ClientEnvelope_IdentityUpdate)
	}{
		{"recovery signature flipped", "recovery signature", func(e *backendpb.ClientEnvelope_IdentityUpdate) {
			e.IdentityUpdate.RecoverySignature[0] ^= 1
		}},
		{"installation signature flipped", "installation signature", func(e *backendpb.ClientEnvelope_IdentityUpdate) {
			e.IdentityUpdate.GetAddInstallation().InstallationSignature[5] ^= 1
		}},
		{"signed fields changed after signing", "recovery signature", func(e *backendpb.ClientEnvelope_IdentityUpdate) {
			e.IdentityUpdate.CreatedNs++
		}},
		{"installation signature missing", "installation signature", func(e *backendpb.ClientEnvelope_IdentityUpdate) {
			e.IdentityUpdate.GetAddInstallation().InstallationSignature = nil
		}},
	} {
		err := pub(c.mutate)
		if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: Publish = %v, want INVALID_ARGUMENT naming %q", c.name, err, c.reason)
		}
	}
	if after, _ := svc.HighestSequenceID(ctx(t), authed, topic); after != before {
		t.Fatalf("a refused update was stored: highest %d -> %d", before, after)
	}
}

// COMP-126: only the installation publishes its own key packages — a
// stranger's republish of an installation's older package is refused and
// the newest package served is unchanged.
func TestCOMP126_StrangerRepublishRefused(t *testing.T) {
	svc := New(newMemStore(), withClock(nil))
	owner, _, _ := ed25519.GenerateKey(nil)
	stranger, _, _ := ed25519.GenerateKey(nil)
	kp := func(body string) *backendpb.ClientEnvelope {
		return &backendpb.ClientEnvelope{
			TargetTopic: append([]byte{byte(ports.TopicKeyPackages)}, owner...),
			Payload:     &backendpb.ClientEnvelope_KeyPackage{KeyPackage: &apipb.KeyPackage{KeyPackageTlsSerialized: []byte(body)}},
		}
	}
	asOwner, asStranger := ports.Caller{InstallationKey: owner}, ports.Caller{InstallationKey: stranger}
	for _, body := range []string{"old package", "new package"} {
		if _, err := svc.Publish(ctx(t), asOwner, []*backendpb.ClientEnvelope{kp(body)}); err != nil {
			t.Fatalf("owner publishing %q: %v", body, err)
		}
	}
	_, err := svc.Publish(ctx(t), asStranger, []*backendpb.ClientEnvelope{kp("old package")})
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "only an installation publishes its own key packages") {
		t.Fatalf("stranger's republish: %v, want INVALID_ARGUMENT", err)
	}
	newest, err := svc.QueryNewest(ctx(t), ports.Caller{}, kp("").GetTargetTopic())
	if err != nil || string(newest.GetEnvelope().GetKeyPackage().GetKeyPackageTlsSerialized()) != "new package" {
		t.Fatalf("newest package after the refused republish = %v, %v; want the owner's newest", newest, err)
	}
}
