package main

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/regroup-mls/regroup/ports"
)

// ErrBlobTampered reports a stored blob that does not open under the
// store's key: it was changed on disk, or written under another key.
var ErrBlobTampered = errors.New("stored blob does not open under the key")

// SealedStore is a ports.Store that encrypts every blob at rest. Blobs
// hold the installation's private state (the MLS engine's group secrets,
// the identity keys), so a copy of the database file without the key
// reveals none of it. It wraps any ports.Store and changes nothing else:
// transactions, the other repositories and ports.MessageTx pass through.
//
// Each value is sealed with AES-256-GCM under a fresh 12-byte nonce, with
// the namespace and key as additional data, so a value copied under
// another key does not open.
//
// Only blobs are sealed: key packages' private keys stay in their own
// repository (ports.KeyPackages) as the wrapped store keeps them; a
// decorator for production would seal those the same way.
type SealedStore struct {
	inner ports.Store
	aead  cipher.AEAD
	// Sealed and Opened count the blobs written and read, for audit.
	Sealed, Opened atomic.Int64
}

var _ ports.Store = (*SealedStore)(nil)

// NewSealedStore wraps inner; key is 32 bytes.
func NewSealedStore(inner ports.Store, key []byte) (*SealedStore, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("sealed store: key of %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sealed store: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("sealed store: %w", err)
	}
	return &SealedStore{inner: inner, aead: aead}, nil
}

// Tx runs fn on the inner store's transaction, with Blobs sealed.
func (s *SealedStore) Tx(ctx context.Context, fn func(tx ports.Tx) error) error {
	return s.inner.Tx(ctx, func(tx ports.Tx) error {
		if mt, ok := tx.(ports.MessageTx); ok {
			return fn(sealedMessageTx{sealedTx{tx, s}, mt})
		}
		return fn(sealedTx{tx, s})
	})
}

// Close closes the inner store.
func (s *SealedStore) Close() error { return s.inner.Close() }

type sealedTx struct {
	ports.Tx
	s *SealedStore
}

func (t sealedTx) Blobs() ports.Blobs { return sealedBlobs{t.Tx.Blobs(), t.s} }

// sealedMessageTx keeps the inner transaction's optional ports.MessageTx,
// which the client requires.
type sealedMessageTx struct {
	sealedTx
	mt ports.MessageTx
}

func (t sealedMessageTx) Messages() ports.Messages { return t.mt.Messages() }

type sealedBlobs struct {
	ports.Blobs // Delete and Keys pass through
	s           *SealedStore
}

func additionalData(namespace, key string) []byte {
	return fmt.Appendf(nil, "%d:%s%s", len(namespace), namespace, key)
}

func (b sealedBlobs) Put(ctx context.Context, namespace, key string, value []byte) error {
	nonce := make([]byte, b.s.aead.NonceSize(), b.s.aead.NonceSize()+len(value)+b.s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("seal blob %s/%s: %w", namespace, key, err)
	}
	sealed := b.s.aead.Seal(nonce, nonce, value, additionalData(namespace, key))
	if err := b.Blobs.Put(ctx, namespace, key, sealed); err != nil {
		return err
	}
	b.s.Sealed.Add(1)
	return nil
}

func (b sealedBlobs) Get(ctx context.Context, namespace, key string) ([]byte, error) {
	sealed, err := b.Blobs.Get(ctx, namespace, key)
	if err != nil {
		return nil, err
	}
	n := b.s.aead.NonceSize()
	if len(sealed) < n+b.s.aead.Overhead() {
		return nil, fmt.Errorf("blob %s/%s: %w", namespace, key, ErrBlobTampered)
	}
	value, err := b.s.aead.Open(nil, sealed[:n], sealed[n:], additionalData(namespace, key))
	if err != nil {
		return nil, fmt.Errorf("blob %s/%s: %w", namespace, key, ErrBlobTampered)
	}
	b.s.Opened.Add(1)
	if value == nil {
		value = []byte{}
	}
	return value, nil
}
