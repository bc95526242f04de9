package host

import (
	"context"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// bounded applies the default call timeout to a ctx without a deadline.
func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// remoteWrapper is a ports.WrapperAlgorithm served by a plugin.
type remoteWrapper struct {
	c       conn
	id      ports.WrapperAlgorithmID
	pubSize int
	timeout time.Duration
}

var _ ports.WrapperAlgorithm = (*remoteWrapper)(nil)

func (w *remoteWrapper) ID() ports.WrapperAlgorithmID { return w.id }
func (w *remoteWrapper) PublicKeySize() int           { return w.pubSize }

func (w *remoteWrapper) GenerateKey(ctx context.Context) (pub, priv []byte, err error) {
	ctx, cancel := bounded(ctx, w.timeout)
	defer cancel()
	err = w.c.call(ctx, "generate key", func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.WrapperGenerateKey(ctx, &pluginpb.WrapperGenerateKeyRequest{Id: int32(w.id)})
		pub, priv = r.GetPublicKey(), r.GetPrivateKey()
		return err
	})
	return pub, priv, err
}

func (w *remoteWrapper) CheckPublicKey(ctx context.Context, pub []byte) error {
	ctx, cancel := bounded(ctx, w.timeout)
	defer cancel()
	return w.c.call(ctx, "check public key", func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		_, err := c.WrapperCheckPublicKey(ctx, &pluginpb.WrapperCheckPublicKeyRequest{Id: int32(w.id), PublicKey: pub})
		return err
	})
}

func (w *remoteWrapper) Seal(ctx context.Context, pub, info []byte, plaintexts ...[]byte) ([][]byte, error) {
	ctx, cancel := bounded(ctx, w.timeout)
	defer cancel()
	var sealed [][]byte
	err := w.c.call(ctx, "seal welcome", func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.WrapperSeal(ctx, &pluginpb.WrapperSealRequest{Id: int32(w.id), PublicKey: pub, Info: info, Plaintexts: plaintexts})
		sealed = r.GetSealed()
		return err
	})
	if err == nil && len(sealed) != len(plaintexts) {
		return nil, fmt.Errorf("seal welcome via plugin %s: %w: %d sealed payloads for %d plaintexts", w.c.name(), ports.ErrAlgorithmUnavailable, len(sealed), len(plaintexts))
	}
	return sealed, err
}

func (w *remoteWrapper) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	ctx, cancel := bounded(ctx, w.timeout)
	defer cancel()
	var pts [][]byte
	err := w.c.call(ctx, "open welcome", func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.WrapperOpen(ctx, &pluginpb.WrapperOpenRequest{Id: int32(w.id), PrivateKey: priv, Info: info, Sealed: sealed})
		pts = r.GetPlaintexts()
		return err
	})
	if err == nil && len(pts) != len(sealed) {
		return nil, fmt.Errorf("open welcome via plugin %s: %w: %d plaintexts for %d sealed payloads", w.c.name(), ports.ErrAlgorithmUnavailable, len(pts), len(sealed))
	}
	return pts, err
}

// remoteAEAD is a ports.PointeeAEAD served by a plugin.
type remoteAEAD struct {
	c                  conn
	id                 ports.PointeeAEADID
	keySize, nonceSize int
	timeout            time.Duration
}

var _ ports.PointeeAEAD = (*remoteAEAD)(nil)

func (a *remoteAEAD) ID() ports.PointeeAEADID { return a.id }
func (a *remoteAEAD) KeySize() int            { return a.keySize }
func (a *remoteAEAD) NonceSize() int          { return a.nonceSize }

func (a *remoteAEAD) Seal(ctx context.Context, key, nonce, plaintext, aad []byte) ([]byte, error) {
	ctx, cancel := bounded(ctx, a.timeout)
	defer cancel()
	var ct []byte
	err := a.c.call(ctx, "seal pointee", func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.AeadSeal(ctx, &pluginpb.AeadSealRequest{Id: int32(a.id), Key: key, Nonce: nonce, Plaintext: plaintext, Aad: aad})
		ct = r.GetCiphertext()
		return err
	})
	return ct, err
}

func (a *remoteAEAD) Open(ctx context.Context, key, nonce, ciphertext, aad []byte) ([]byte, error) {
	ctx, cancel := bounded(ctx, a.timeout)
	defer cancel()
	var pt []byte
	err := a.c.call(ctx, "open pointee", func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.AeadOpen(ctx, &pluginpb.AeadOpenRequest{Id: int32(a.id), Key: key, Nonce: nonce, Ciphertext: ciphertext, Aad: aad})
		pt = r.GetPlaintext()
		if err == nil && pt == nil {
			pt = []byte{}
		}
		return err
	})
	return pt, err
}
