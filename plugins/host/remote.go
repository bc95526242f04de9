package host

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/plugins/internal/protocol"
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

// replySlack covers a reply's field tags and length prefixes beyond the
// bytes of its payloads: at most 11 bytes per payload, plus a constant.
const replySlack = 64

// recvLimit is a call option capping the reply at n bytes (and at the
// protocol's message limit), so that a reply the request cannot yield is
// refused before it is decoded.
func recvLimit(n int) grpc.CallOption {
	return grpc.MaxCallRecvMsgSize(min(n, protocol.MaxMessageSize))
}

// checkRequest refuses a request too large to send: the caller's input,
// not the plugin, is at fault.
func checkRequest(what string, req proto.Message) error {
	if n := proto.Size(req); n > protocol.MaxMessageSize {
		return fmt.Errorf("%s: %w: request of %d bytes exceeds the plugin message limit of %d", what, ports.ErrInvalidInput, n, protocol.MaxMessageSize)
	}
	return nil
}

// misbehaved is the error of a call whose reply breaks the protocol.
func misbehaved(what, plugin, format string, args ...any) error {
	return fmt.Errorf("%s via plugin %s: %w: %w: %s", what, plugin, ports.ErrAlgorithmUnavailable, ErrMisbehaved, fmt.Sprintf(format, args...))
}

// remoteWrapper is a ports.WrapperAlgorithm served by a plugin.
type remoteWrapper struct {
	c       conn
	id      ports.WrapperAlgorithmID
	pubSize int
	timeout time.Duration
}

var (
	_ ports.WrapperAlgorithm = (*remoteWrapper)(nil)
	_ ports.Hosted           = (*remoteWrapper)(nil)
	_ ports.Hosted           = (*remoteAEAD)(nil)
)

func (w *remoteWrapper) ID() ports.WrapperAlgorithmID { return w.id }

// HostedBy names the plugin that serves the wrapper ([ports.Hosted]).
func (w *remoteWrapper) HostedBy() string   { return w.c.name() }
func (w *remoteWrapper) PublicKeySize() int { return w.pubSize }

func (w *remoteWrapper) checkPub(what string, pub []byte) error {
	if len(pub) != w.pubSize {
		return fmt.Errorf("%s: %w: public key is %d bytes, want %d", what, ports.ErrInvalidKey, len(pub), w.pubSize)
	}
	return nil
}

func (w *remoteWrapper) GenerateKey(ctx context.Context) (pub, priv []byte, err error) {
	ctx, cancel := bounded(ctx, w.timeout)
	defer cancel()
	const what = "generate key"
	err = w.c.call(ctx, what, func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.WrapperGenerateKey(ctx, &pluginpb.WrapperGenerateKeyRequest{Id: int32(w.id)},
			recvLimit(w.pubSize+MaxPrivateKeySize+replySlack))
		pub, priv = r.GetPublicKey(), r.GetPrivateKey()
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(pub) != w.pubSize {
		return nil, nil, misbehaved(what, w.c.name(), "public key of %d bytes, declared %d", len(pub), w.pubSize)
	}
	if len(priv) == 0 || len(priv) > MaxPrivateKeySize {
		return nil, nil, misbehaved(what, w.c.name(), "private key of %d bytes", len(priv))
	}
	return pub, priv, nil
}

func (w *remoteWrapper) CheckPublicKey(ctx context.Context, pub []byte) error {
	ctx, cancel := bounded(ctx, w.timeout)
	defer cancel()
	const what = "check public key"
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := w.checkPub(what, pub); err != nil {
		return err
	}
	return w.c.call(ctx, what, func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		_, err := c.WrapperCheckPublicKey(ctx, &pluginpb.WrapperCheckPublicKeyRequest{Id: int32(w.id), PublicKey: pub}, recvLimit(replySlack))
		return err
	})
}

func (w *remoteWrapper) Seal(ctx context.Context, pub, info []byte, plaintexts ...[]byte) ([][]byte, error) {
	ctx, cancel := bounded(ctx, w.timeout)
	defer cancel()
	const what = "seal welcome"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(plaintexts) == 0 {
		return nil, fmt.Errorf("%s: %w: no plaintext", what, ports.ErrInvalidInput)
	}
	if err := w.checkPub(what, pub); err != nil {
		return nil, err
	}
	req := &pluginpb.WrapperSealRequest{Id: int32(w.id), PublicKey: pub, Info: info, Plaintexts: plaintexts}
	if err := checkRequest(what, req); err != nil {
		return nil, err
	}
	limit := replySlack
	for _, pt := range plaintexts {
		limit += len(pt) + MaxWrapperOverhead + 11
	}
	var sealed [][]byte
	err := w.c.call(ctx, what, func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.WrapperSeal(ctx, req, recvLimit(limit))
		sealed = r.GetSealed()
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(sealed) != len(plaintexts) {
		return nil, misbehaved(what, w.c.name(), "%d sealed payloads for %d plaintexts", len(sealed), len(plaintexts))
	}
	for i, s := range sealed {
		if n := len(plaintexts[i]); len(s) <= n || len(s) > n+MaxWrapperOverhead {
			return nil, misbehaved(what, w.c.name(), "sealed payload %d is %d bytes for %d of plaintext", i, len(s), n)
		}
	}
	return sealed, nil
}

func (w *remoteWrapper) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	ctx, cancel := bounded(ctx, w.timeout)
	defer cancel()
	const what = "open welcome"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(sealed) == 0 {
		return nil, fmt.Errorf("%s: %w: no ciphertext", what, ports.ErrInvalidInput)
	}
	if len(priv) == 0 || len(priv) > MaxPrivateKeySize {
		return nil, fmt.Errorf("%s: %w: private key is %d bytes", what, ports.ErrInvalidKey, len(priv))
	}
	req := &pluginpb.WrapperOpenRequest{Id: int32(w.id), PrivateKey: priv, Info: info, Sealed: sealed}
	if err := checkRequest(what, req); err != nil {
		return nil, err
	}
	limit := replySlack
	for _, s := range sealed {
		limit += len(s) + 11
	}
	var pts [][]byte
	err := w.c.call(ctx, what, func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.WrapperOpen(ctx, req, recvLimit(limit))
		pts = r.GetPlaintexts()
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(pts) != len(sealed) {
		return nil, misbehaved(what, w.c.name(), "%d plaintexts for %d sealed payloads", len(pts), len(sealed))
	}
	for i, pt := range pts {
		if len(pt) >= len(sealed[i]) {
			return nil, misbehaved(what, w.c.name(), "plaintext %d is %d bytes from %d sealed", i, len(pt), len(sealed[i]))
		}
		if pt == nil {
			pts[i] = []byte{}
		}
	}
	return pts, nil
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

// HostedBy names the plugin that serves the AEAD ([ports.Hosted]).
func (a *remoteAEAD) HostedBy() string { return a.c.name() }
func (a *remoteAEAD) KeySize() int     { return a.keySize }
func (a *remoteAEAD) NonceSize() int   { return a.nonceSize }

// checkArgs checks what the pointee AEAD contract fixes before a call.
func (a *remoteAEAD) checkArgs(ctx context.Context, what string, key, nonce []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(key) != a.keySize {
		return fmt.Errorf("%s: %w: key is %d bytes, want %d", what, ports.ErrInvalidKey, len(key), a.keySize)
	}
	if len(nonce) != a.nonceSize {
		return fmt.Errorf("%s: %w: nonce is %d bytes, want %d", what, ports.ErrInvalidInput, len(nonce), a.nonceSize)
	}
	return nil
}

func (a *remoteAEAD) Seal(ctx context.Context, key, nonce, plaintext, aad []byte) ([]byte, error) {
	ctx, cancel := bounded(ctx, a.timeout)
	defer cancel()
	const what = "seal pointee"
	if err := a.checkArgs(ctx, what, key, nonce); err != nil {
		return nil, err
	}
	req := &pluginpb.AeadSealRequest{Id: int32(a.id), Key: key, Nonce: nonce, Plaintext: plaintext, Aad: aad}
	if err := checkRequest(what, req); err != nil {
		return nil, err
	}
	var ct []byte
	err := a.c.call(ctx, what, func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.AeadSeal(ctx, req, recvLimit(len(plaintext)+MaxAEADOverhead+replySlack))
		ct = r.GetCiphertext()
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(ct) <= len(plaintext) || len(ct) > len(plaintext)+MaxAEADOverhead {
		return nil, misbehaved(what, a.c.name(), "ciphertext of %d bytes for %d of plaintext", len(ct), len(plaintext))
	}
	return ct, nil
}

func (a *remoteAEAD) Open(ctx context.Context, key, nonce, ciphertext, aad []byte) ([]byte, error) {
	ctx, cancel := bounded(ctx, a.timeout)
	defer cancel()
	const what = "open pointee"
	if err := a.checkArgs(ctx, what, key, nonce); err != nil {
		return nil, err
	}
	req := &pluginpb.AeadOpenRequest{Id: int32(a.id), Key: key, Nonce: nonce, Ciphertext: ciphertext, Aad: aad}
	if err := checkRequest(what, req); err != nil {
		return nil, err
	}
	var pt []byte
	err := a.c.call(ctx, what, func(ctx context.Context, c pluginpb.AlgorithmsClient) error {
		r, err := c.AeadOpen(ctx, req, recvLimit(len(ciphertext)+replySlack))
		pt = r.GetPlaintext()
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(pt) >= len(ciphertext) {
		return nil, misbehaved(what, a.c.name(), "plaintext of %d bytes from a %d-byte ciphertext", len(pt), len(ciphertext))
	}
	if pt == nil {
		pt = []byte{}
	}
	return pt, nil
}
