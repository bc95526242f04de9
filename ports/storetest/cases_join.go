package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

var joinCases = []testCase{
	{"JOIN-045/ProcessedEnvelopeAtMostOnce", testProcessedOnce},
	{"JOIN-045/HeldWelcomeKeptOnce", testHeldWelcomeOnce},
	{"JOIN-018/HeldWelcomesInSequenceOrder", testHeldWelcomeOrder},
	{"JOIN-063/DeadlineNeverMovesLater", testDeadline},
	{"JOIN-019/DestroyErasesAllThreePrivateKeys", testDestroy},
	{"JOIN-076/KeyPackageByWrapperPublicKey", testKeyPackageLookup},
	{"JOIN-051/IdentityUpdatesOnceInOrder", testIdentityCache},
	{"FORK-064/ReaddStatusUpsert", testReadds},
	{"PROC-005/GroupsListedAndFiltered", testGroupsList},
}

func testProcessedOnce(t *testing.T, h Harness) {
	s := open(t, h)
	topic := []byte("welcome-topic")
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		pe := tx.ProcessedEnvelopes()
		if has, err := pe.Has(ctx, topic, 4); err != nil || has {
			t.Errorf("Has before Mark = %v, %v", has, err)
		}
		first, err := pe.Mark(ctx, topic, 4)
		if err != nil || !first {
			t.Errorf("first Mark = %v, %v; want true", first, err)
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		pe := tx.ProcessedEnvelopes()
		first, err := pe.Mark(ctx, topic, 4)
		if err != nil || first {
			t.Errorf("second Mark = %v, %v; want false: the effects would apply twice", first, err)
		}
		if has, err := pe.Has(ctx, topic, 4); err != nil || !has {
			t.Errorf("Has after Mark = %v, %v", has, err)
		}
		if has, _ := pe.Has(ctx, []byte("other-topic"), 4); has {
			t.Errorf("a mark leaked to another topic")
		}
		if has, _ := pe.Has(ctx, topic, 5); has {
			t.Errorf("a mark leaked to another sequence id")
		}
		return nil
	})
}

func welcome(seq uint64) ports.HeldWelcome {
	return ports.HeldWelcome{
		SequenceID: seq, Envelope: []byte{0x0a, byte(seq), 0xff, 0x00},
		ServerTimestamp: at(int(seq)), FirstSeenAt: at(int(seq) + 1), Reason: "unreadable",
		Attempts: 1, GroupID: gid(int(seq)),
	}
}

func testHeldWelcomeOnce(t *testing.T, h Harness) {
	s := open(t, h)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ins, err := tx.HeldWelcomes().Put(ctx, welcome(3))
		if err != nil || !ins {
			t.Errorf("first Put = %v, %v", ins, err)
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		again := welcome(3)
		again.FirstSeenAt = at(1000) // a redelivery must not reset the first-seen time
		ins, err := tx.HeldWelcomes().Put(ctx, again)
		if err != nil || ins {
			t.Errorf("second Put = %v, %v; want false", ins, err)
		}
		got, err := tx.HeldWelcomes().Get(ctx, 3)
		if err != nil {
			return err
		}
		expect(t, "held Welcome keeps its first copy", got, welcome(3))
		if n, err := tx.HeldWelcomes().Count(ctx); err != nil || n != 1 {
			t.Errorf("Count = %d, %v; want 1", n, err)
		}
		return nil
	})
}

func testHeldWelcomeOrder(t *testing.T, h Harness) {
	s := open(t, h)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, q := range []uint64{30, 2, 1 << 35, 11} {
			if _, err := tx.HeldWelcomes().Put(ctx, welcome(q)); err != nil {
				return err
			}
		}
		if err := tx.HeldWelcomes().Delete(ctx, 11); err != nil {
			return err
		}
		return tx.HeldWelcomes().Delete(ctx, 12345) // absent: not an error
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.HeldWelcomes().List(ctx)
		if err != nil {
			return err
		}
		expect(t, "held Welcomes", got, []ports.HeldWelcome{welcome(2), welcome(30), welcome(1 << 35)})
		if n, err := tx.HeldWelcomes().Count(ctx); err != nil || n != 3 {
			t.Errorf("Count = %d, %v; want 3", n, err)
		}
		return nil
	})
}

func testDeadline(t *testing.T, h Harness) {
	s := open(t, h)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		_, err := tx.HeldWelcomes().Put(ctx, welcome(5))
		return err
	})
	// Setting the first deadline, then an earlier one, is allowed.
	for _, d := range []int{500, 400} {
		must(t, s, func(ctx context.Context, tx ports.Tx) error {
			return tx.HeldWelcomes().Update(ctx, 5, func(w *ports.HeldWelcome) error {
				w.Deadline = at(d)
				w.Attempts++
				return nil
			})
		})
	}
	ctx := ctxFor(t)
	for _, c := range []struct {
		what string
		set  func(w *ports.HeldWelcome)
	}{
		{"a later deadline", func(w *ports.HeldWelcome) { w.Deadline = at(401) }},
		{"a cleared deadline", func(w *ports.HeldWelcome) { w.Deadline = ports.HeldWelcome{}.Deadline }},
	} {
		err := s.Tx(ctx, func(tx ports.Tx) error {
			return tx.HeldWelcomes().Update(ctx, 5, func(w *ports.HeldWelcome) error {
				c.set(w)
				w.Reason = "changed reason"
				return nil
			})
		})
		if !errors.Is(err, ports.ErrDeadlineLater) {
			t.Errorf("Update to %s returned %v, want ErrDeadlineLater", c.what, err)
		}
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.HeldWelcomes().Get(ctx, 5)
		if err != nil {
			return err
		}
		want := welcome(5)
		want.Deadline, want.Attempts = at(400), 3
		expect(t, "held Welcome after refused updates", got, want)
		return nil
	})
}

func keyPackage(n int) ports.KeyPackageRecord {
	return ports.KeyPackageRecord{
		Ref: []byte{0xaa, byte(n)}, KeyPackage: []byte{1, byte(n)}, WrapperAlgorithm: 2,
		WrapperPublicKey: []byte{0xbb, byte(n)}, InitPrivateKey: []byte{0xc1, byte(n)},
		EncryptionPrivateKey: []byte{0xc2, byte(n)}, WrapperPrivateKey: []byte{0xc3, byte(n)},
		CreatedAt: at(n), NotAfter: at(n + 86400),
	}
}

func testDestroy(t *testing.T, h Harness) {
	s := open(t, h)
	kp := keyPackage(1)
	must(t, s, func(ctx context.Context, tx ports.Tx) error { return tx.KeyPackages().Insert(ctx, kp) })
	must(t, s, func(ctx context.Context, tx ports.Tx) error { return tx.KeyPackages().Destroy(ctx, kp.Ref, at(50)) })
	must(t, s, func(ctx context.Context, tx ports.Tx) error { return tx.KeyPackages().Destroy(ctx, kp.Ref, at(60)) })
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.KeyPackages().Get(ctx, kp.Ref)
		if err != nil {
			return err
		}
		if len(got.InitPrivateKey)+len(got.EncryptionPrivateKey)+len(got.WrapperPrivateKey) != 0 {
			t.Errorf("after Destroy private keys remain: init %x encryption %x wrapper %x",
				got.InitPrivateKey, got.EncryptionPrivateKey, got.WrapperPrivateKey)
		}
		want := kp
		want.InitPrivateKey, want.EncryptionPrivateKey, want.WrapperPrivateKey = nil, nil, nil
		want.DestroyedAt = got.DestroyedAt
		expect(t, "public part and history kept", got, want)
		if !got.DestroyedAt.Equal(at(50)) && !got.DestroyedAt.Equal(at(60)) {
			t.Errorf("DestroyedAt = %v, want the destruction time", got.DestroyedAt)
		}
		byPub, err := tx.KeyPackages().ByWrapperPublicKey(ctx, kp.WrapperPublicKey)
		if err != nil {
			return err
		}
		if len(byPub.WrapperPrivateKey) != 0 {
			t.Errorf("lookup by wrapper public key still returns the private key")
		}
		return nil
	})
}

func testKeyPackageLookup(t *testing.T, h Harness) {
	s := open(t, h)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, n := range []int{3, 1, 2} {
			if err := tx.KeyPackages().Insert(ctx, keyPackage(n)); err != nil {
				return err
			}
		}
		return tx.KeyPackages().Update(ctx, keyPackage(2).Ref, func(r *ports.KeyPackageRecord) error {
			r.PublishSequenceID, r.PublishConfirmedAt, r.PublishRefused = 77, at(9), true
			return nil
		})
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.KeyPackages().ByWrapperPublicKey(ctx, keyPackage(2).WrapperPublicKey)
		if err != nil {
			return err
		}
		want := keyPackage(2)
		want.PublishSequenceID, want.PublishConfirmedAt, want.PublishRefused = 77, at(9), true
		expect(t, "record by wrapper public key", got, want)
		if _, err := tx.KeyPackages().ByWrapperPublicKey(ctx, []byte("unknown")); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("unknown wrapper key: %v, want ErrNotFound", err)
		}
		all, err := tx.KeyPackages().List(ctx)
		if err != nil {
			return err
		}
		expect(t, "records in creation order", all, []ports.KeyPackageRecord{keyPackage(1), want, keyPackage(3)})
		return nil
	})
}

func testIdentityCache(t *testing.T, h Harness) {
	s := open(t, h)
	rec := func(inbox string, seq uint64) ports.IdentityUpdateRecord {
		return ports.IdentityUpdateRecord{InboxID: inbox, SequenceID: seq, Update: []byte(inbox + "@" + string(rune('0'+seq%10)))}
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, q := range []uint64{5, 1, 9, 3} {
			if ins, err := tx.IdentityCache().Put(ctx, rec("inbox-a", q)); err != nil || !ins {
				t.Errorf("Put %d = %v, %v", q, ins, err)
			}
		}
		_, err := tx.IdentityCache().Put(ctx, rec("inbox-b", 20))
		return err
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		changed := rec("inbox-a", 5)
		changed.Update = []byte("different")
		if ins, err := tx.IdentityCache().Put(ctx, changed); err != nil || ins {
			t.Errorf("second Put = %v, %v; want false", ins, err)
		}
		got, err := tx.IdentityCache().List(ctx, "inbox-a", 5)
		if err != nil {
			return err
		}
		expect(t, "updates through 5", got, []ports.IdentityUpdateRecord{rec("inbox-a", 1), rec("inbox-a", 3), rec("inbox-a", 5)})
		hi, err := tx.IdentityCache().Highest(ctx, "inbox-a")
		if err != nil || hi != 9 {
			t.Errorf("Highest = %d, %v; want 9", hi, err)
		}
		if hi, err := tx.IdentityCache().Highest(ctx, "nobody"); err != nil || hi != 0 {
			t.Errorf("Highest of an unknown inbox = %d, %v; want 0", hi, err)
		}
		return nil
	})
}

func testReadds(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(11)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, k := range []string{"inst-b", "inst-a", "inst-c"} {
			err := tx.Readds().Upsert(ctx, g, []byte(k), func(s *ports.ReaddStatus) error {
				if s.Requested || s.RequestedAt != 0 || string(s.InstallationKey) != k {
					t.Errorf("absent status handed to fn as %+v", *s)
				}
				s.Requested, s.RequestedAt, s.UpdatedAt = k != "inst-c", 10, at(1)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return tx.Readds().Upsert(ctx, g, []byte("inst-a"), func(s *ports.ReaddStatus) error {
			s.RespondedAt, s.NotBefore = 12, at(2)
			return nil
		})
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.Readds().Get(ctx, g, []byte("inst-a"))
		if err != nil {
			return err
		}
		wantA := ports.ReaddStatus{GroupID: g, InstallationKey: []byte("inst-a"), Requested: true, RequestedAt: 10, RespondedAt: 12, NotBefore: at(2), UpdatedAt: at(1)}
		expect(t, "readd status", got, wantA)
		list, err := tx.Readds().ListRequested(ctx)
		if err != nil {
			return err
		}
		wantB := ports.ReaddStatus{GroupID: g, InstallationKey: []byte("inst-b"), Requested: true, RequestedAt: 10, UpdatedAt: at(1)}
		expect(t, "requested statuses", list, []ports.ReaddStatus{wantA, wantB})
		return nil
	})
}

func testGroupsList(t *testing.T, h Harness) {
	s := open(t, h)
	allowed, denied := ports.ConsentAllowed, ports.ConsentDenied
	dm, yes := ports.ConversationDM, true
	mk := func(n int, c ports.ConsentState, ct ports.ConversationType, active bool) ports.Group {
		return ports.Group{ID: gid(n), Consent: c, ConversationType: ct, Active: active, DMID: "", CreatedAt: at(n)}
	}
	gs := []ports.Group{mk(3, allowed, dm, true), mk(1, denied, dm, true), mk(2, allowed, ports.ConversationGroup, false)}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, g := range gs {
			if err := tx.Groups().Insert(ctx, g); err != nil {
				return err
			}
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, c := range []struct {
			what string
			f    ports.GroupFilter
			want []ports.Group
		}{
			{"no filter, by id", ports.GroupFilter{}, []ports.Group{gs[1], gs[2], gs[0]}},
			{"allowed", ports.GroupFilter{Consent: &allowed}, []ports.Group{gs[2], gs[0]}},
			{"allowed DMs", ports.GroupFilter{Consent: &allowed, ConversationType: &dm}, []ports.Group{gs[0]}},
			{"active", ports.GroupFilter{Active: &yes}, []ports.Group{gs[1], gs[0]}},
		} {
			got, err := tx.Groups().List(ctx, c.f)
			if err != nil {
				return err
			}
			expect(t, "List "+c.what, got, c.want)
		}
		return nil
	})
}
