package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// realKeyPackage makes a key package with the built-in engine for a fresh
// installation, with a 0xff03 extension naming alg and key.
func realKeyPackage(t *testing.T, alg contentspb.WelcomeWrapperAlgorithm, key []byte) (installationKey, kp []byte) {
	pub, kp, _ := realKeyPackageWithKey(t, alg, key)
	return pub, kp
}

// realKeyPackageWithKey is realKeyPackage that also returns the
// installation's private key, which a connection publishing the package
// must prove.
func realKeyPackageWithKey(t *testing.T, alg contentspb.WelcomeWrapperAlgorithm, key []byte) (installationKey, kp []byte, priv ed25519.PrivateKey) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(nil)
	engine, err := mls.New(mls.Options{SignaturePrivateKey: priv.Seed()})
	if err != nil {
		t.Fatal(err)
	}
	ext, _ := proto.Marshal(&contentspb.WelcomeWrapperEncryption{PubKey: key, Algorithm: alg})
	b, err := engine.CreateKeyPackage(context.Background(), ports.KeyPackageOptions{
		Credential: []byte("inbox"), SignaturePrivateKey: priv.Seed(),
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * 7 * 24 * time.Hour),
		Extensions: []ports.Extension{{Type: 0xff03, Data: ext}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return pub, b.KeyPackage, priv
}

func kpEnvelope(installationKey, kp []byte) *backendpb.ClientEnvelope {
	return &backendpb.ClientEnvelope{
		TargetTopic: transporttest.Topic(ports.TopicKeyPackages, installationKey),
		Payload:     &backendpb.ClientEnvelope_KeyPackage{KeyPackage: &apipb.KeyPackage{KeyPackageTlsSerialized: kp}},
	}
}

// JOIN-090 end to end: regroupd with its built-in engine stores a key
// package it validates and can address, serves it as the newest, and
// refuses with InvalidArgument one whose wrapper no sender can use, one on
// another installation's topic, and bytes that are no key package.
func TestJOIN090_RegroupdKeyPackageAdmission(t *testing.T) {
	t.Parallel()
	h := newGRPCHarness(t, "sqlite")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wpub, _, err := hpkewrap.NewCurve25519().GenerateKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	curve := contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_CURVE25519
	ik, kp, ipriv := realKeyPackageWithKey(t, curve, wpub)
	tr := h.dial(t, ipriv) // only the installation publishes its key packages
	if _, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{kpEnvelope(ik, kp)}); err != nil {
		t.Fatalf("valid key package refused: %v", err)
	}
	got, err := h.NewAnonymousTransport(t).QueryNewest(ctx, transporttest.Topic(ports.TopicKeyPackages, ik))
	if err != nil || string(got.GetEnvelope().GetKeyPackage().GetKeyPackageTlsSerialized()) != string(kp) {
		t.Fatalf("QueryNewest = %v, %v", got, err)
	}
	xwing := contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6
	bik, bkp, bpriv := realKeyPackageWithKey(t, xwing, wpub) // a 32-byte key under X-Wing
	_, other := realKeyPackage(t, curve, wpub)
	for name, c := range map[string]struct {
		env    *backendpb.ClientEnvelope
		tr     ports.Transport
		reason string
	}{
		"X-Wing wrapper with a 32-byte key": {kpEnvelope(bik, bkp), h.dial(t, bpriv), "JOIN-090"},
		"on another installation's topic":   {kpEnvelope(ik, other), tr, "installation key"},
		"bytes that are not a key package":  {kpEnvelope(ik, []byte("not a key package")), tr, "does not validate"},
	} {
		_, err := c.tr.Publish(ctx, []*backendpb.ClientEnvelope{c.env})
		if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: Publish = %v, want InvalidArgument naming %q", name, err, c.reason)
		}
	}
}
