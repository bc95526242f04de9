package keypackage

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// lost reports packages created before the current one whose publish
// outcome is unknown (no sequence id, not refused) and whose settlement
// read has not happened.
func (s snapshot) lost() []ports.KeyPackageRecord {
	var out []ports.KeyPackageRecord
	for i, r := range s.recs {
		if i < s.current && r.PublishSequenceID == 0 && !r.PublishRefused && r.DestroyedAt.IsZero() {
			if _, ok := s.settled[hex.EncodeToString(r.Ref)]; !ok {
				out = append(out, r)
			}
		}
	}
	return out
}

// settle runs the settlement read of JOIN-074 for packages whose publish
// response was lost: when the newest package the installation's topic
// serves is another package and its sequence id is at least the current
// package's (the highest publish response held), each such package's
// destruction delay starts now.
func (m *Manager) settle(ctx context.Context) error {
	s, err := m.snapshot(ctx)
	if err != nil || s.current < 0 {
		return err
	}
	lost := s.lost()
	if len(lost) == 0 {
		return nil
	}
	env, err := m.o.Transport.QueryNewest(ctx, m.topic())
	if err != nil {
		return err
	}
	if env.GetSequenceId() < s.recs[s.current].PublishSequenceID {
		return nil
	}
	served := env.GetEnvelope().GetKeyPackage().GetKeyPackageTlsSerialized()
	stamp := binary.BigEndian.AppendUint64(nil, uint64(m.o.Clock.Now().UnixNano()))
	return m.o.Store.Tx(ctx, func(tx ports.Tx) error {
		for _, r := range lost {
			if bytes.Equal(served, r.KeyPackage) {
				continue // the lost publish is what senders use
			}
			if err := tx.Blobs().Put(ctx, BlobNamespace, blobSettled+hex.EncodeToString(r.Ref), stamp); err != nil {
				return err
			}
		}
		return nil
	})
}

// destroyAt returns when package i's private keys are due for destruction,
// and false when they are not scheduled: a refused package at once
// (JOIN-020); a confirmed package DestroyDelay after the earliest confirmed
// publish of a later package; a package whose response was lost
// DestroyDelay after its settlement read (JOIN-074). The current package
// and packages created after it are never scheduled (JOIN-003), whatever
// sequence ids the delivery service returned (COMP-256).
func (m *Manager) destroyAt(s snapshot, i int) (time.Time, bool) {
	r := s.recs[i]
	switch {
	case !r.DestroyedAt.IsZero() || i == s.current:
		return time.Time{}, false
	case r.PublishRefused:
		return r.CreatedAt, true
	case s.current < 0 || i > s.current:
		return time.Time{}, false
	case r.PublishSequenceID == 0:
		at, ok := s.settled[hex.EncodeToString(r.Ref)]
		return at.Add(m.o.DestroyDelay), ok
	}
	// A later package is one created later (list order), whatever the
	// sequence id its publish response carried: ids are not
	// authenticated, and the two guards above keep the keys of the
	// package with the highest id and of every package created after it.
	var first time.Time
	for _, o := range s.recs[i+1:] {
		if o.PublishSequenceID > 0 && !o.PublishRefused && (first.IsZero() || o.PublishConfirmedAt.Before(first)) {
			first = o.PublishConfirmedAt
		}
	}
	return first.Add(m.o.DestroyDelay), !first.IsZero()
}

// DestroySuperseded destroys, in one transaction, all three private keys
// (JOIN-019) of every package whose destruction is due, and returns how
// many it destroyed. While the store holds a received Welcome not yet
// completed or rejected it destroys nothing (JOIN-018).
func (m *Manager) DestroySuperseded(ctx context.Context) (int, error) {
	n := 0
	err := m.o.Store.Tx(ctx, func(tx ports.Tx) error {
		n = 0
		held, err := tx.HeldWelcomes().Count(ctx)
		if err != nil || held > 0 {
			return err
		}
		s, err := m.read(ctx, tx)
		if err != nil {
			return err
		}
		now := m.o.Clock.Now()
		for i, r := range s.recs {
			if at, ok := m.destroyAt(s, i); ok && !now.Before(at) {
				if err := tx.KeyPackages().Destroy(ctx, r.Ref, now); err != nil {
					return err
				}
				if err := tx.Blobs().Delete(ctx, BlobNamespace, blobSettled+hex.EncodeToString(r.Ref)); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	return n, err
}
