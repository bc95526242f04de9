package join

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// PointerThreshold is the number of pointer-capable installations a commit
// must add before the sender uses welcome pointers: more than two
// (JOIN-091, COMP-061).
const PointerThreshold = 2

// Recipient is one installation a commit added, with the addressing its
// key package advertised.
type Recipient struct {
	// InstallationKey is the leaf's signature_key; it names the
	// recipient's welcome topic.
	InstallationKey []byte
	// Wrapper and WrapperPublicKey are the algorithm and key of the key
	// package's 0xff03 extension, or CURVE25519 and its init_key when the
	// extension is absent (JOIN-071).
	Wrapper          ports.WrapperAlgorithmID
	WrapperPublicKey []byte
	// PointeeAEADs are the pointee AEADs the key package's 0xff04
	// extension advertises, unknown values already dropped (JOIN-090).
	PointeeAEADs []ports.PointeeAEADID
}

// pointerCapable reports whether r may receive a welcome pointer
// (JOIN-091): ChaCha20-Poly1305 in 0xff04 and X-Wing in 0xff03.
func (r Recipient) pointerCapable() bool {
	return r.Wrapper == ports.WrapperXWingMLKEM768Draft6 &&
		slices.Contains(r.PointeeAEADs, ports.PointeeAEADChaCha20Poly1305)
}

// Sender wraps the Welcome of a commit for each installation it added.
type Sender struct {
	// Algorithms holds the wrapper algorithms and pointee AEADs.
	Algorithms *algorithm.Registry
	// Rand is the source of pointee destinations, keys and nonces; nil
	// uses crypto/rand (JOIN-029, JOIN-030).
	Rand io.Reader
}

// ErrSend wraps a failure to build a Welcome envelope.
var ErrSend = errors.New("build welcome")

// Envelopes returns the envelopes that deliver welcome (an MLSMessage
// carrying a Welcome) to every recipient, with message_cursor set to the
// sequence id of the commit that added them (section 6). A recipient gets
// a welcome pointer when more than [PointerThreshold] recipients are
// pointer-capable and it is one of them; then one pointee, published
// first, carries the Welcome for all of them (JOIN-091). Every other
// recipient gets an inline WelcomeMessage.V1 (JOIN-071).
func (s *Sender) Envelopes(ctx context.Context, welcome []byte, cursor uint64, recipients []Recipient) ([]*backendpb.ClientEnvelope, error) {
	meta, err := proto.Marshal(&contentspb.WelcomeMetadata{MessageCursor: cursor})
	if err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrSend, err)
	}
	var capable []Recipient
	for _, r := range recipients {
		if r.pointerCapable() {
			capable = append(capable, r)
		}
	}
	var out []*backendpb.ClientEnvelope
	var pointer *contentspb.WelcomePointer
	if len(capable) > PointerThreshold {
		pointee, ptr, err := s.pointee(ctx, welcome, meta)
		if err != nil {
			return nil, err
		}
		out, pointer = append(out, pointee), ptr
	}
	for _, r := range recipients {
		var env *backendpb.ClientEnvelope
		if pointer != nil && r.pointerCapable() {
			env, err = s.wrapPointer(ctx, r, pointer)
		} else {
			env, err = s.wrapInline(ctx, r, welcome, meta)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: for installation %x: %w", ErrSend, r.InstallationKey, err)
		}
		out = append(out, env)
	}
	return out, nil
}

// WelcomeTopic returns the welcome topic of an installation key or pointee
// destination: 0x01 || identifier (TOPIC-001).
func WelcomeTopic(id []byte) []byte { return append([]byte{byte(ports.TopicWelcomes)}, id...) }

func welcomeEnvelope(id []byte, m *apipb.WelcomeMessage) *backendpb.ClientEnvelope {
	return &backendpb.ClientEnvelope{TargetTopic: WelcomeTopic(id),
		Payload: &backendpb.ClientEnvelope_WelcomeMessage{WelcomeMessage: m}}
}

// wrapInline seals the Welcome and its metadata under one HPKE context to
// the advertised key (JOIN-071, COMP-060).
func (s *Sender) wrapInline(ctx context.Context, r Recipient, welcome, meta []byte) (*backendpb.ClientEnvelope, error) {
	w, err := s.Algorithms.Wrapper(r.Wrapper)
	if err != nil {
		return nil, err
	}
	sealed, err := w.Seal(ctx, r.WrapperPublicKey, ports.WelcomeWrapperInfo(), welcome, meta)
	if err != nil {
		return nil, err
	}
	return welcomeEnvelope(r.InstallationKey, &apipb.WelcomeMessage{Version: &apipb.WelcomeMessage_V1_{V1: &apipb.WelcomeMessage_V1{
		InstallationKey: r.InstallationKey, Data: sealed[0], HpkePublicKey: r.WrapperPublicKey,
		WrapperAlgorithm: contentspb.WelcomeWrapperAlgorithm(r.Wrapper), WelcomeMetadata: sealed[1],
	}}}), nil
}

// wrapPointer seals the pointer to an X-Wing key (JOIN-091).
func (s *Sender) wrapPointer(ctx context.Context, r Recipient, p *contentspb.WelcomePointer) (*backendpb.ClientEnvelope, error) {
	w, err := s.Algorithms.Wrapper(r.Wrapper)
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(p)
	if err != nil {
		return nil, err
	}
	sealed, err := w.Seal(ctx, r.WrapperPublicKey, ports.WelcomeWrapperInfo(), b)
	if err != nil {
		return nil, err
	}
	return welcomeEnvelope(r.InstallationKey, &apipb.WelcomeMessage{Version: &apipb.WelcomeMessage_WelcomePointer_{WelcomePointer: &apipb.WelcomeMessage_WelcomePointer{
		InstallationKey: r.InstallationKey, WelcomePointer: sealed[0], HpkePublicKey: r.WrapperPublicKey,
		WrapperAlgorithm: contentspb.WelcomePointerWrapperAlgorithm(r.Wrapper),
	}}}), nil
}

// pointee encrypts the Welcome and its metadata once under a fresh key and
// two distinct nonces, addressed to a fresh random destination (JOIN-029,
// JOIN-030, JOIN-065, JOIN-078), and returns the pointee envelope and the
// pointer that names it.
func (s *Sender) pointee(ctx context.Context, welcome, meta []byte) (*backendpb.ClientEnvelope, *contentspb.WelcomePointer, error) {
	aead, err := s.Algorithms.PointeeAEAD(ports.PointeeAEADChaCha20Poly1305)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: pointee aead: %w", ErrSend, err)
	}
	rnd := s.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	dest, key := make([]byte, 32), make([]byte, aead.KeySize())
	dataNonce, metaNonce := make([]byte, aead.NonceSize()), make([]byte, aead.NonceSize())
	for _, b := range [][]byte{dest, key, dataNonce, metaNonce} {
		if _, err := io.ReadFull(rnd, b); err != nil {
			return nil, nil, fmt.Errorf("%w: random: %v", ErrSend, err)
		}
	}
	for slices.Equal(dataNonce, metaNonce) { // JOIN-065: two different values
		if _, err := io.ReadFull(rnd, metaNonce); err != nil {
			return nil, nil, fmt.Errorf("%w: random: %v", ErrSend, err)
		}
	}
	data, err := aead.Seal(ctx, key, dataNonce, welcome, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: pointee data: %w", ErrSend, err)
	}
	sealedMeta, err := aead.Seal(ctx, key, metaNonce, meta, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: pointee metadata: %w", ErrSend, err)
	}
	env := welcomeEnvelope(dest, &apipb.WelcomeMessage{Version: &apipb.WelcomeMessage_V1_{V1: &apipb.WelcomeMessage_V1{
		InstallationKey: dest, Data: data, WrapperAlgorithm: contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY,
		WelcomeMetadata: sealedMeta,
	}}})
	ptr := &contentspb.WelcomePointer{Version: &contentspb.WelcomePointer_WelcomeV1Pointer_{WelcomeV1Pointer: &contentspb.WelcomePointer_WelcomeV1Pointer{
		Destination: dest, AeadType: contentspb.WelcomePointeeEncryptionAeadType_WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305,
		EncryptionKey: key, DataNonce: dataNonce, WelcomeMetadataNonce: metaNonce,
	}}}
	return env, ptr, nil
}
