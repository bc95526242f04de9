package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// valueCases check that values come back whole whatever their size, zone
// or emptiness, on every repository that stores them.
var valueCases = []testCase{
	{"Store/LargeValuesOnEveryPath", testLargeValues},
	{"Store/TimesKeepTheirInstantInAnyZone", testTimeZones},
	{"Store/EmptyValuesAreValues", testEmptyValues},
	{"COMP-573/BlobPrefixIsTheValuesFirstBytes", testBlobPrefix},
}

// pattern returns n bytes that differ from their neighbours, so a
// truncation or a shifted copy shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31+i>>8) ^ seed
	}
	return b
}

// testLargeValues stores the largest value each field carries in practice
// (a 1 MiB Welcome, identity update and message; a key package with an
// X-Wing key; thousands of super admins) and reads each back whole.
func testLargeValues(t *testing.T, h Harness) {
	s := open(t, h)
	g := fullGroup(80)
	g.MaybeForkedReason = strings.Repeat("reason ", 10000)
	kp := keyPackage(80)
	kp.KeyPackage, kp.WrapperPublicKey, kp.WrapperPrivateKey = pattern(256<<10, 1), pattern(1216, 2), pattern(2400, 3)
	w := welcome(80)
	w.Envelope = pattern(1<<20, 4)
	local := localEntry(g.ID, 1, 80)
	local.AddedSuperAdmins = nil
	for i := range 3000 {
		local.AddedSuperAdmins = append(local.AddedSuperAdmins, fmt.Sprintf("inbox-%064d", i))
	}
	remote := remoteEntry(g.ID, 80)
	remote.AuthorInstallationKey = pattern(1216, 5)
	ident := ports.IdentityUpdateRecord{InboxID: "inbox-large", SequenceID: 1, Update: pattern(1<<20, 6)}
	msg := ports.Message{GroupID: g.ID, SequenceID: 80, Kind: ports.MessageApplication, Content: pattern(1<<20, 7)}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.Groups().Insert(ctx, g); err != nil {
			return err
		}
		if err := tx.KeyPackages().Insert(ctx, kp); err != nil {
			return err
		}
		if _, err := tx.HeldWelcomes().Put(ctx, w); err != nil {
			return err
		}
		stored, _, err := tx.LocalCommitLog().Append(ctx, local)
		if err != nil {
			return err
		}
		local.Seq = stored.Seq
		if _, err := tx.RemoteCommitLog().Insert(ctx, remote); err != nil {
			return err
		}
		if _, err := tx.IdentityCache().Put(ctx, ident); err != nil {
			return err
		}
		if mt, ok := tx.(ports.MessageTx); ok {
			stored, _, err := mt.Messages().Insert(ctx, msg)
			if err != nil {
				return err
			}
			msg.ID = stored.ID
		}
		return nil
	})
	s = reopenIfAble(t, h, s)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		gotG, err := tx.Groups().Get(ctx, g.ID)
		expectNoErr(t, err)
		expect(t, "group with a 70 kB reason", gotG, g)
		gotK, err := tx.KeyPackages().Get(ctx, kp.Ref)
		expectNoErr(t, err)
		expect(t, "key package of 256 KiB", gotK, kp)
		byPub, err := tx.KeyPackages().ByWrapperPublicKey(ctx, kp.WrapperPublicKey)
		expectNoErr(t, err)
		expect(t, "key package by its 1,216-byte wrapper key", byPub, kp)
		gotW, err := tx.HeldWelcomes().Get(ctx, w.SequenceID)
		expectNoErr(t, err)
		expect(t, "held Welcome of 1 MiB", gotW, w)
		list, err := tx.HeldWelcomes().List(ctx)
		expectNoErr(t, err)
		expect(t, "held Welcome of 1 MiB, listed", list, []ports.HeldWelcome{w})
		gotL, err := tx.LocalCommitLog().Last(ctx, g.ID)
		expectNoErr(t, err)
		expect(t, "local entry with 3,000 super admins", gotL, local)
		gotR, err := tx.RemoteCommitLog().Last(ctx, g.ID)
		expectNoErr(t, err)
		expect(t, "accepted entry with a 1,216-byte author key", gotR, remote)
		gotI, err := tx.IdentityCache().List(ctx, ident.InboxID, 10)
		expectNoErr(t, err)
		expect(t, "identity update of 1 MiB", gotI, []ports.IdentityUpdateRecord{ident})
		if mt, ok := tx.(ports.MessageTx); ok {
			gotM, err := mt.Messages().List(ctx, g.ID, 0, 0)
			expectNoErr(t, err)
			expect(t, "message of 1 MiB", gotM, []ports.Message{msg})
		}
		return nil
	})
}

// zones returns two locations far from UTC on either side, one with a
// 45-minute offset: times written in them must keep their instant.
func zones() []*time.Location {
	chatham, err := time.LoadLocation("Pacific/Chatham")
	if err != nil {
		chatham = time.FixedZone("+1245", 12*3600+45*60)
	}
	return []*time.Location{chatham, time.FixedZone("-0930", -(9*3600 + 30*60))}
}

// testTimeZones writes every time field in zones other than UTC and reads
// back the same instants; JOIN-063's comparison and creation order follow
// instants, not wall clocks. A store that keeps wall-clock fields without
// their offset passes with UTC data and fails here, whatever the process's
// own zone.
func testTimeZones(t *testing.T, h Harness) {
	s := open(t, h)
	east, west := zones()[0], zones()[1]
	g := fullGroup(81)
	g.CreatedAt, g.UpdatedAt = at(1).In(east), at(2).In(west)
	// Created first, but its wall clock reads later than the next one's.
	early := keyPackage(81)
	early.CreatedAt, early.NotAfter, early.PublishConfirmedAt = at(100).In(east), at(90000).In(west), at(3).In(east)
	late := keyPackage(82)
	late.CreatedAt, late.NotAfter = at(200).In(west), at(90000)
	w := welcome(81)
	w.ServerTimestamp, w.FirstSeenAt, w.Deadline = at(4).In(east), at(5).In(west), at(500).In(east)
	readd := ports.ReaddStatus{GroupID: g.ID, InstallationKey: []byte("inst"), NotBefore: at(6).In(west), UpdatedAt: at(7).In(east)}
	local := localEntry(g.ID, 1, 8)
	local.RecordedAt = at(8).In(east)
	remote := remoteEntry(g.ID, 9)
	remote.AcceptedAt = at(9).In(west)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.Groups().Insert(ctx, g); err != nil {
			return err
		}
		for _, r := range []ports.KeyPackageRecord{late, early} {
			if err := tx.KeyPackages().Insert(ctx, r); err != nil {
				return err
			}
		}
		if _, err := tx.HeldWelcomes().Put(ctx, w); err != nil {
			return err
		}
		if err := tx.Readds().Upsert(ctx, g.ID, readd.InstallationKey, func(s *ports.ReaddStatus) error { *s = readd; return nil }); err != nil {
			return err
		}
		stored, _, err := tx.LocalCommitLog().Append(ctx, local)
		local.Seq = stored.Seq
		if err != nil {
			return err
		}
		if _, err := tx.RemoteCommitLog().Insert(ctx, remote); err != nil {
			return err
		}
		return tx.KeyPackages().Destroy(ctx, late.Ref, at(300).In(east))
	})
	ctx := ctxFor(t)
	// The same deadline written in another zone is not later; a second
	// later is, whatever the zone.
	if err := s.Tx(ctx, func(tx ports.Tx) error {
		return tx.HeldWelcomes().Update(ctx, w.SequenceID, func(hw *ports.HeldWelcome) error { hw.Deadline = at(500).In(west); return nil })
	}); err != nil {
		t.Errorf("JOIN-063: setting the same deadline written in another zone: %v", err)
	}
	if err := s.Tx(ctx, func(tx ports.Tx) error {
		return tx.HeldWelcomes().Update(ctx, w.SequenceID, func(hw *ports.HeldWelcome) error { hw.Deadline = at(501).In(east); return nil })
	}); !errors.Is(err, ports.ErrDeadlineLater) {
		t.Errorf("JOIN-063: a deadline one second later, in a zone east of the stored one: %v, want ErrDeadlineLater", err)
	}
	s = reopenIfAble(t, h, s)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		gotG, err := tx.Groups().Get(ctx, g.ID)
		expectNoErr(t, err)
		expect(t, "group times", gotG, g)
		ks, err := tx.KeyPackages().List(ctx)
		expectNoErr(t, err)
		destroyed := late
		destroyed.InitPrivateKey, destroyed.EncryptionPrivateKey, destroyed.WrapperPrivateKey = nil, nil, nil
		destroyed.DestroyedAt = at(300)
		expect(t, "key packages in creation order by instant, with their times", ks, []ports.KeyPackageRecord{early, destroyed})
		gotW, err := tx.HeldWelcomes().Get(ctx, w.SequenceID)
		expectNoErr(t, err)
		expect(t, "held Welcome times", gotW, w)
		gotR, err := tx.Readds().Get(ctx, g.ID, readd.InstallationKey)
		expectNoErr(t, err)
		expect(t, "readd times", gotR, readd)
		gotL, err := tx.LocalCommitLog().Last(ctx, g.ID)
		expectNoErr(t, err)
		expect(t, "local entry time", gotL, local)
		gotA, err := tx.RemoteCommitLog().Last(ctx, g.ID)
		expectNoErr(t, err)
		expect(t, "accepted entry time", gotA, remote)
		if mt, ok := tx.(ports.MessageTx); ok {
			m, _, err := mt.Messages().Insert(ctx, ports.Message{GroupID: g.ID, Kind: ports.MessageApplication, Own: true, PayloadHash: []byte{8}, SentAt: at(10).In(east)})
			if err != nil {
				return err
			}
			if err := mt.Messages().SetSequenceID(ctx, m.ID, 90, at(11).In(west)); err != nil {
				return err
			}
			got, err := mt.Messages().ByPayloadHash(ctx, g.ID, []byte{8})
			expectNoErr(t, err)
			if !got.SentAt.Equal(at(11)) {
				t.Errorf("message SentAt set in a zone west of UTC read back as %v, want %v", got.SentAt, at(11))
			}
		}
		return nil
	})
}

// testEmptyValues: an empty value is a value, not an absence.
func testEmptyValues(t *testing.T, h Harness) {
	s := open(t, h)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.Blobs().Put(ctx, "mls", "empty", []byte{}); err != nil {
			return err
		}
		if err := tx.Blobs().Put(ctx, "mls", "nil", nil); err != nil {
			return err
		}
		_, err := tx.IdentityCache().Put(ctx, ports.IdentityUpdateRecord{InboxID: "inbox-empty", SequenceID: 3})
		return err
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, k := range []string{"empty", "nil"} {
			if v, err := tx.Blobs().Get(ctx, "mls", k); err != nil || len(v) != 0 {
				t.Errorf("Get of a blob stored %s = %x, %v; want an empty value", k, v, err)
			}
		}
		keys, err := tx.Blobs().Keys(ctx, "mls", "")
		if err != nil {
			return err
		}
		expect(t, "keys of empty blobs", keys, []string{"empty", "nil"})
		if hi, err := tx.IdentityCache().Highest(ctx, "inbox-empty"); err != nil || hi != 3 {
			t.Errorf("Highest after an empty identity update = %d, %v; want 3", hi, err)
		}
		return nil
	})
}
