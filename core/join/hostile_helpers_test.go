package join_test

import (
	"context"
	"crypto/rand"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Builders of hostile Welcomes: each seals with the real wrappers and
// AEAD, so only the field a case changes is wrong.

func welcomeEnv(topicID []byte, m *apipb.WelcomeMessage) *backendpb.ClientEnvelope {
	return &backendpb.ClientEnvelope{TargetTopic: join.WelcomeTopic(topicID),
		Payload: &backendpb.ClientEnvelope_WelcomeMessage{WelcomeMessage: m}}
}

func meta(cursor uint64) []byte {
	return mustMarshal(&contentspb.WelcomeMetadata{MessageCursor: cursor})
}

// inline seals payloads (the Welcome, then the metadata, if any) under
// alg to pub, and labels the message with label and pub.
func (in *inst) inline(r join.Recipient, alg, label ports.WrapperAlgorithmID, payloads ...[]byte) *backendpb.ClientEnvelope {
	in.w.t.Helper()
	w, err := in.reg.Wrapper(alg)
	if err != nil {
		in.w.t.Fatal(err)
	}
	sealed, err := w.Seal(in.w.ctx, r.WrapperPublicKey, ports.WelcomeWrapperInfo(), payloads...)
	if err != nil {
		in.w.t.Fatal(err)
	}
	v1 := &apipb.WelcomeMessage_V1{InstallationKey: r.InstallationKey, Data: sealed[0], HpkePublicKey: r.WrapperPublicKey,
		WrapperAlgorithm: contentspb.WelcomeWrapperAlgorithm(label)}
	if len(sealed) > 1 {
		v1.WelcomeMetadata = sealed[1]
	}
	return welcomeEnv(r.InstallationKey, &apipb.WelcomeMessage{Version: &apipb.WelcomeMessage_V1_{V1: v1}})
}

// pointerFor seals ptr as a welcome pointer to r (an X-Wing recipient).
func (in *inst) pointerFor(r join.Recipient, ptr *contentspb.WelcomePointer) *backendpb.ClientEnvelope {
	in.w.t.Helper()
	w, err := in.reg.Wrapper(ports.WrapperXWingMLKEM768Draft6)
	if err != nil {
		in.w.t.Fatal(err)
	}
	sealed, err := w.Seal(in.w.ctx, r.WrapperPublicKey, ports.WelcomeWrapperInfo(), mustMarshal(ptr))
	if err != nil {
		in.w.t.Fatal(err)
	}
	return welcomeEnv(r.InstallationKey, &apipb.WelcomeMessage{Version: &apipb.WelcomeMessage_WelcomePointer_{WelcomePointer: &apipb.WelcomeMessage_WelcomePointer{
		InstallationKey: r.InstallationKey, WelcomePointer: sealed[0], HpkePublicKey: r.WrapperPublicKey,
		WrapperAlgorithm: contentspb.WelcomePointerWrapperAlgorithm_WELCOME_POINTER_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6}}})
}

// pointeeKeys is a fresh pointer: destination, key and two nonces.
type pointeeKeys struct{ dest, key, dataNonce, metaNonce []byte }

func newPointeeKeys() pointeeKeys {
	k := pointeeKeys{make([]byte, 32), make([]byte, 32), make([]byte, 12), make([]byte, 12)}
	for _, b := range [][]byte{k.dest, k.key, k.dataNonce, k.metaNonce} {
		rand.Read(b)
	}
	return k
}

func (k pointeeKeys) pointer() *contentspb.WelcomePointer {
	return &contentspb.WelcomePointer{Version: &contentspb.WelcomePointer_WelcomeV1Pointer_{WelcomeV1Pointer: &contentspb.WelcomePointer_WelcomeV1Pointer{
		Destination: k.dest, AeadType: contentspb.WelcomePointeeEncryptionAeadType_WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305,
		EncryptionKey: k.key, DataNonce: k.dataNonce, WelcomeMetadataNonce: k.metaNonce}}}
}

// pointee seals welcome and metadata under k as a V1 on k.dest labelled
// alg.
func (in *inst) pointee(k pointeeKeys, alg ports.WrapperAlgorithmID, welcome, md []byte) *backendpb.ClientEnvelope {
	in.w.t.Helper()
	a, err := in.reg.PointeeAEAD(ports.PointeeAEADChaCha20Poly1305)
	if err != nil {
		in.w.t.Fatal(err)
	}
	data, _ := a.Seal(in.w.ctx, k.key, k.dataNonce, welcome, nil)
	sm, _ := a.Seal(in.w.ctx, k.key, k.metaNonce, md, nil)
	return welcomeEnv(k.dest, &apipb.WelcomeMessage{Version: &apipb.WelcomeMessage_V1_{V1: &apipb.WelcomeMessage_V1{
		InstallationKey: k.dest, Data: data, WrapperAlgorithm: contentspb.WelcomeWrapperAlgorithm(alg), WelcomeMetadata: sm}}})
}

// rewriting is a transport that serves envelopes of one topic rewritten:
// what a delivery service that skips regroupd's admission checks serves.
type rewriting struct {
	ports.Transport
	topic   []byte
	rewrite func(*backendpb.OriginatorEnvelope)
}

func (r *rewriting) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	envs, err := r.Transport.Query(ctx, topic, after, limit)
	if string(topic) == string(r.topic) {
		for _, e := range envs {
			r.rewrite(e)
		}
	}
	return envs, err
}

// pskWelcome builds, with the engine's group layer, a Welcome adding kp
// whose GroupSecrets name an external PSK (JOIN-027).
func (in *inst) pskWelcome(kp []byte) []byte {
	t := in.w.t
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	cred := mustMarshal(&contentspb.MlsCredential{InboxId: in.inbox()})
	now := in.w.clock.Now()
	leaf, err := in.eng.CreateKeyPackage(in.w.ctx, ports.KeyPackageOptions{Credential: cred, SignaturePrivateKey: in.id.InstallationKey.Seed(),
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var ka, kb message.KeyPackage
	if err := codec.Unmarshal(leaf.KeyPackage, &ka); err != nil {
		t.Fatal(err)
	}
	if err := codec.Unmarshal(kp, &kb); err != nil {
		t.Fatal(err)
	}
	g, err := group.Create(s, &group.CreateOptions{GroupID: make([]byte, 32), Leaf: &ka.LeafNode, EncryptionPriv: leaf.EncryptionPrivateKey,
		SignaturePriv: in.id.InstallationKey.Seed(), PSKs: group.MapPSKStore{"psk": []byte("secret")}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Commit(&group.CommitOptions{TreeInWelcome: true, Proposals: []*message.Proposal{
		{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: kb}},
		{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: message.PreSharedKeyID{Type: message.PSKExternal, ID: []byte("psk"), Nonce: make([]byte, 32)}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: p.Welcome})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var _ = proto.Marshal
