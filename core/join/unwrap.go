package join

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// opened is a Welcome taken out of its wrapper (and pointer).
type opened struct {
	kp      ports.KeyPackageRecord
	welcome []byte // the MLSMessage
	meta    []byte // the WelcomeMetadata plaintext
	hasMeta bool
	// seq is the Welcome's own sequence id: the envelope's, or for a
	// pointer the pointee's (COMP-165).
	seq uint64
}

// open unwraps the envelope of a held Welcome: an inline V1 under the
// advertised key (JOIN-076), or a pointer and its pointee (section 5).
func (r *Receiver) open(ctx context.Context, env *backendpb.OriginatorEnvelope) (opened, error) {
	wm := env.GetEnvelope().GetWelcomeMessage()
	if wm == nil {
		return opened{}, reject("JOIN-048", "envelope on the welcome topic carries no welcome_message")
	}
	switch v := wm.GetVersion().(type) {
	case *apipb.WelcomeMessage_V1_:
		w := v.V1
		if len(w.GetData()) == 0 {
			return opened{}, reject("JOIN-048", "welcome has no data")
		}
		sealed := [][]byte{w.GetData()}
		if len(w.GetWelcomeMetadata()) > 0 {
			sealed = append(sealed, w.GetWelcomeMetadata())
		}
		kp, plain, err := r.unwrap(ctx, w.GetHpkePublicKey(), ports.WrapperAlgorithmID(w.GetWrapperAlgorithm()), sealed...)
		if err != nil {
			return opened{}, err
		}
		o := opened{kp: kp, welcome: plain[0], seq: env.GetSequenceId()}
		if len(plain) > 1 {
			o.meta, o.hasMeta = plain[1], true
		}
		return o, nil
	case *apipb.WelcomeMessage_WelcomePointer_:
		return r.openPointer(ctx, env, v.WelcomePointer)
	}
	return opened{}, hold(HoldUnreadable, "JOIN-087", "welcome_message version variant is not supported")
}

// unwrap finds the key package whose advertised wrapper key is hpkePub
// and opens sealed with its private key under alg, which must be the
// algorithm that package advertised (JOIN-076). Failures map through the
// registry's sentinels: unsupported is held (JOIN-087), missing keys are
// held (JOIN-084), an unavailable implementation is retried (JOIN-085),
// a ciphertext that does not open is rejected.
func (r *Receiver) unwrap(ctx context.Context, hpkePub []byte, alg ports.WrapperAlgorithmID, sealed ...[]byte) (ports.KeyPackageRecord, [][]byte, error) {
	var kp ports.KeyPackageRecord
	err := r.o.Store.Tx(ctx, func(tx ports.Tx) (err error) {
		kp, err = tx.KeyPackages().ByWrapperPublicKey(ctx, hpkePub)
		return err
	})
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return kp, nil, hold(HoldUnreadable, "JOIN-084", "no key package advertises hpke_public_key %x", short(hpkePub))
	case err != nil:
		return kp, nil, local(err)
	}
	if want := ports.WrapperAlgorithmID(kp.WrapperAlgorithm); alg != want {
		return kp, nil, reject("JOIN-076", "wrapper_algorithm %v is not %v, which the key package advertised", alg, want)
	}
	if len(kp.WrapperPrivateKey) == 0 {
		return kp, nil, hold(HoldUnreadable, "JOIN-084", "the wrapper private key of key package %x is not held", short(kp.Ref))
	}
	w, err := r.o.Algorithms.Wrapper(alg)
	if err != nil {
		return kp, nil, hold(HoldUnreadable, "JOIN-087", "%v", err)
	}
	plain, err := w.Open(ctx, kp.WrapperPrivateKey, ports.WelcomeWrapperInfo(), sealed...)
	switch {
	case err == nil:
		if len(plain) != len(sealed) {
			return kp, nil, local(errors.New("wrapper returned a wrong number of plaintexts"))
		}
		r.hosted.add(w, plain...)
		return kp, plain, nil
	case errors.Is(err, ports.ErrUnsupportedAlgorithm):
		return kp, nil, hold(HoldUnreadable, "JOIN-087", "%v", err)
	case errors.Is(err, ports.ErrNotRecipient), errors.Is(err, ports.ErrCorrupt), errors.Is(err, ports.ErrInvalidInput):
		return kp, nil, reject("JOIN-048", "unwrap under %v: %v", alg, err)
	}
	return kp, nil, local(err) // ErrAlgorithmUnavailable, ErrInvalidKey of a stored key, anything else
}

// wellFormed reports a pointer of the form JOIN-094 holds for.
func wellFormed(p *contentspb.WelcomePointer_WelcomeV1Pointer) bool {
	return len(p.GetDestination()) == 32 &&
		p.GetAeadType() == contentspb.WelcomePointeeEncryptionAeadType_WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305 &&
		len(p.GetEncryptionKey()) == 32 && len(p.GetDataNonce()) == 12 && len(p.GetWelcomeMetadataNonce()) == 12 &&
		!bytes.Equal(p.GetDataNonce(), p.GetWelcomeMetadataNonce())
}

// openPointer unwraps a welcome pointer and resolves it to its pointee.
func (r *Receiver) openPointer(ctx context.Context, env *backendpb.OriginatorEnvelope, wp *apipb.WelcomeMessage_WelcomePointer) (opened, error) {
	if len(wp.GetWelcomePointer()) == 0 {
		return opened{}, reject("JOIN-048", "welcome pointer has no welcome_pointer")
	}
	kp, plain, err := r.unwrap(ctx, wp.GetHpkePublicKey(), ports.WrapperAlgorithmID(wp.GetWrapperAlgorithm()), wp.GetWelcomePointer())
	if err != nil {
		return opened{}, err
	}
	var ptr contentspb.WelcomePointer
	if err := proto.Unmarshal(plain[0], &ptr); err != nil {
		return opened{}, unreadable("JOIN-048", "welcome pointer does not decode: %v", err)
	}
	p := ptr.GetWelcomeV1Pointer()
	if p == nil {
		return opened{}, hold(HoldUnreadable, "JOIN-087", "welcome pointer version variant is not supported")
	}
	if !wellFormed(p) {
		return opened{}, unreadable("JOIN-094", "welcome pointer is not well formed (destination %d bytes, aead %v, key %d bytes, nonces %d and %d bytes)",
			len(p.GetDestination()), p.GetAeadType(), len(p.GetEncryptionKey()), len(p.GetDataNonce()), len(p.GetWelcomeMetadataNonce()))
	}
	aead, err := r.o.Algorithms.PointeeAEAD(ports.PointeeAEADID(p.GetAeadType()))
	if err != nil {
		return opened{}, hold(HoldUnreadable, "JOIN-087", "%v", err)
	}
	// JOIN-032: only the message with the lowest sequence id counts.
	envs, err := r.o.Transport.Query(ctx, WelcomeTopic(p.GetDestination()), 0, 1)
	if err != nil || len(envs) == 0 {
		if err == nil {
			err = errors.New("the pointee topic is empty")
		}
		return opened{}, &Hold{Kind: HoldPointee, Rule: "JOIN-094", Err: err}
	}
	// A service may serve more than asked, in any order: the lowest id
	// is the pointee.
	pe := slices.MinFunc(envs, func(a, b *backendpb.OriginatorEnvelope) int {
		return cmp.Compare(a.GetSequenceId(), b.GetSequenceId())
	})
	pm := pe.GetEnvelope().GetWelcomeMessage()
	if pm.GetWelcomePointer() != nil {
		return opened{}, reject("JOIN-033", "the pointee is itself a welcome pointer")
	}
	pv := pm.GetV1()
	if pv == nil {
		return opened{}, reject("JOIN-048", "the pointee is not a WelcomeMessage.V1")
	}
	if !bytes.Equal(pv.GetInstallationKey(), p.GetDestination()) {
		return opened{}, reject("JOIN-056", "the pointee's installation_key is not the pointer's destination")
	}
	if ports.WrapperAlgorithmID(pv.GetWrapperAlgorithm()) != ports.WrapperSymmetricKey {
		return opened{}, reject("JOIN-056", "the pointee's wrapper_algorithm is %v, not SYMMETRIC_KEY", ports.WrapperAlgorithmID(pv.GetWrapperAlgorithm()))
	}
	// The pointee is published before its pointers; a sequence id above
	// the pointer's is the delivery service's error, and the lower one
	// bounds the anchor and the identity references (COMP-165).
	o := opened{kp: kp, seq: min(pe.GetSequenceId(), env.GetSequenceId())}
	if o.welcome, err = openPointee(ctx, aead, p.GetEncryptionKey(), p.GetDataNonce(), pv.GetData()); err != nil {
		return opened{}, r.underHostedKey(err)
	}
	r.hosted.add(aead, o.welcome)
	if len(pv.GetWelcomeMetadata()) > 0 {
		if o.meta, err = openPointee(ctx, aead, p.GetEncryptionKey(), p.GetWelcomeMetadataNonce(), pv.GetWelcomeMetadata()); err != nil {
			return opened{}, r.underHostedKey(err)
		}
		r.hosted.add(aead, o.meta)
		o.hasMeta = true
	}
	return o, nil
}

// openPointee authenticates and decrypts one pointee field (JOIN-064).
func openPointee(ctx context.Context, aead ports.PointeeAEAD, key, nonce, ct []byte) ([]byte, error) {
	pt, err := aead.Open(ctx, key, nonce, ct, nil)
	switch {
	case err == nil:
		return pt, nil
	case errors.Is(err, ports.ErrAlgorithmUnavailable):
		return nil, local(err)
	case errors.Is(err, ports.ErrCorrupt), errors.Is(err, ports.ErrInvalidInput), errors.Is(err, ports.ErrInvalidKey):
		return nil, reject("JOIN-064", "pointee does not authenticate: %v", err)
	}
	return nil, local(err)
}

// underHostedKey marks a pointee that does not authenticate under a key a
// plugin returned (the pointer's plaintext) as a refusal of that
// plaintext: the plugin may have returned the wrong key (COMP-272).
func (r *Receiver) underHostedKey(err error) error {
	var rej *Rejection
	if r.hosted.name != "" && errors.As(err, &rej) {
		return &Rejection{Rule: rej.Rule, Err: rej.Err, plaintext: true}
	}
	return err
}

// pointeeDeadline is JOIN-094's: 3 days after the pointer's timestamp.
func pointeeDeadline(h ports.HeldWelcome) time.Time { return h.ServerTimestamp.Add(3 * 24 * time.Hour) }

func short(b []byte) []byte {
	if len(b) > 8 {
		return b[:8]
	}
	return b
}
