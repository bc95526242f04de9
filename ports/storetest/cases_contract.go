package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// contractCases pin the promises of the repositories that hold no spec
// rule of their own: values that belong to nobody else, counters that
// outlive the process, pages that end, orders that are the promised one
// and not an accident of the data, not-found errors on every path, and
// keys that match exactly.
var contractCases = []testCase{
	{"Store/NoAliasingOfCallerOrStoreMemory", testNoAliasing},
	{"FORK-021/SeqSurvivesReopen", testSeqSurvivesReopen},
	{"JOIN-044/MessageIDSurvivesReopen", testMessageIDSurvivesReopen},
	{"Store/PagingReachesShortLastPage", testPaging},
	{"Store/ListOrdersOnDataThatSortsOtherwise", testListOrders},
	{"Store/ErrNotFoundOnEveryPath", testNotFoundEverywhere},
	{"Store/UpdateAbortsOnFnErrorAndKeepsTheKey", testUpdateSemantics},
	{"Store/KeyAndPrefixMatchesAreExact", testExactKeys},
}

// testNoAliasing: a store keeps its own copy of what it is given and hands
// out copies. A caller that reuses its buffers after a write, or changes
// what a read returned, changes nothing stored.
func testNoAliasing(t *testing.T, h Harness) {
	s := open(t, h)
	g, kp, w := fullGroup(60), keyPackage(60), welcome(60)
	local := localEntry(g.ID, 1, 5)
	value := []byte("engine state 60")
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
		if _, _, err := tx.LocalCommitLog().Append(ctx, local); err != nil {
			return err
		}
		return tx.Blobs().Put(ctx, "mls", "alias", value)
	})
	// The caller reuses every buffer it wrote from.
	g.ID[15] ^= 0xff
	g.GroupRoot[0] ^= 0xff
	kp.InitPrivateKey[0] ^= 0xff
	w.Envelope[0] ^= 0xff
	local.AddedSuperAdmins[0] = "mallory"
	value[0] ^= 0xff
	check := func(ctx context.Context, tx ports.Tx, when string) error {
		gotG, err := tx.Groups().Get(ctx, gid(60))
		if err != nil {
			return err
		}
		expect(t, when+": group", gotG, fullGroup(60))
		gotK, err := tx.KeyPackages().Get(ctx, keyPackage(60).Ref)
		if err != nil {
			return err
		}
		expect(t, when+": key package", gotK, keyPackage(60))
		gotW, err := tx.HeldWelcomes().Get(ctx, 60)
		if err != nil {
			return err
		}
		expect(t, when+": held Welcome", gotW, welcome(60))
		gotL, err := tx.LocalCommitLog().Last(ctx, gid(60))
		if err != nil {
			return err
		}
		wantL := localEntry(gid(60), 1, 5)
		wantL.Seq = 1
		expect(t, when+": local entry", gotL, wantL)
		gotV, err := tx.Blobs().Get(ctx, "mls", "alias")
		if err != nil {
			return err
		}
		expect(t, when+": blob", string(gotV), "engine state 60")
		// The caller changes what it read.
		gotG.GroupRoot[0] ^= 0xff
		gotG.ID[0] ^= 0xff
		gotK.InitPrivateKey[0] ^= 0xff
		gotW.Envelope[0] ^= 0xff
		gotL.AddedSuperAdmins[0] = "mallory"
		gotV[0] ^= 0xff
		return nil
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := check(ctx, tx, "after the caller reused its buffers"); err != nil {
			return err
		}
		return check(ctx, tx, "after the caller changed a read, same transaction")
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		return check(ctx, tx, "after the caller changed a read, next transaction")
	})
}

// testSeqSurvivesReopen: a local entry's Seq continues after a restart;
// a counter kept in memory would start again at 1.
func testSeqSurvivesReopen(t *testing.T, h Harness) {
	needReopen(t, h)
	s := open(t, h)
	g := gid(61)
	appendN := func(s ports.Store, from, to uint64) {
		must(t, s, func(ctx context.Context, tx ports.Tx) error {
			for c := from; c <= to; c++ {
				if _, _, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, c)); err != nil {
					return err
				}
			}
			_, _, err := tx.LocalCommitLog().Append(ctx, localEntry(gid(62), 1, to))
			return err
		})
	}
	appendN(s, 1, 3)
	s = reopen(t, h, s)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		e, inserted, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, 4))
		if err != nil {
			return err
		}
		if !inserted || e.Seq != 4 {
			t.Errorf("first append after a restart: inserted=%v Seq=%d, want true and 4", inserted, e.Seq)
		}
		return nil
	})
	s = reopen(t, h, s)
	appendN(s, 5, 6)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		all, err := tx.LocalCommitLog().List(ctx, g, 0, 0)
		if err != nil {
			return err
		}
		for i, e := range all {
			if e.Seq != uint64(i+1) || e.CommitSequenceID != uint64(i+1) {
				t.Errorf("entry %d after restarts: Seq %d commit %d, want %d and %d", i, e.Seq, e.CommitSequenceID, i+1, i+1)
			}
		}
		if len(all) != 6 {
			t.Errorf("log holds %d entries after restarts, want 6", len(all))
		}
		return nil
	})
}

// testMessageIDSurvivesReopen: message ids keep increasing across a
// restart.
func testMessageIDSurvivesReopen(t *testing.T, h Harness) {
	needReopen(t, h)
	s := open(t, h)
	var last uint64
	insert := func(s ports.Store, seq uint64) {
		must(t, s, func(ctx context.Context, tx ports.Tx) error {
			m, ins, err := messagesOf(t, h, tx).Insert(ctx, ports.Message{GroupID: gid(63), SequenceID: seq, Kind: ports.MessageApplication, Content: []byte{byte(seq)}})
			if err != nil {
				return err
			}
			if !ins || m.ID <= last {
				t.Errorf("message at %d: inserted=%v id %d, want a new id above %d", seq, ins, m.ID, last)
			}
			last = m.ID
			return nil
		})
	}
	insert(s, 10)
	insert(s, 11)
	s = reopen(t, h, s)
	insert(s, 12)
}

// testPaging pages through every limited list with a page size that does
// not divide the total: the short last page comes back whole, then an
// empty one.
func testPaging(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(64)
	const total, limit = 7, 3
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for i := 1; i <= total; i++ {
			if _, _, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, uint64(i))); err != nil {
				return err
			}
			if _, err := tx.RemoteCommitLog().Insert(ctx, remoteEntry(g, uint64(i*10))); err != nil {
				return err
			}
			if mt, ok := tx.(ports.MessageTx); ok {
				if _, _, err := mt.Messages().Insert(ctx, ports.Message{GroupID: g, SequenceID: uint64(i * 10), Kind: ports.MessageApplication}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		var sizes []int
		var seen []uint64
		for after := uint64(0); ; {
			page, err := tx.LocalCommitLog().List(ctx, g, after, limit)
			if err != nil {
				return err
			}
			sizes = append(sizes, len(page))
			if len(page) == 0 || len(sizes) > total+1 {
				break
			}
			for _, e := range page {
				seen = append(seen, e.Seq)
			}
			after = page[len(page)-1].Seq
		}
		expect(t, "local log pages of 3", fmt.Sprint(sizes, seen), fmt.Sprint([]int{3, 3, 1, 0}, []uint64{1, 2, 3, 4, 5, 6, 7}))
		sizes, seen = nil, nil
		for after := uint64(0); ; {
			page, err := tx.RemoteCommitLog().List(ctx, g, after, limit)
			if err != nil {
				return err
			}
			sizes = append(sizes, len(page))
			if len(page) == 0 || len(sizes) > total+1 {
				break
			}
			for _, e := range page {
				seen = append(seen, e.EnvelopeSequenceID)
			}
			after = page[len(page)-1].EnvelopeSequenceID
		}
		expect(t, "accepted entry pages of 3", fmt.Sprint(sizes, seen), fmt.Sprint([]int{3, 3, 1, 0}, []uint64{10, 20, 30, 40, 50, 60, 70}))
		mt, ok := tx.(ports.MessageTx)
		if !ok {
			return nil // the message cases report the missing interface
		}
		sizes, seen = nil, nil
		for after := uint64(0); ; {
			page, err := mt.Messages().List(ctx, g, after, limit)
			if err != nil {
				return err
			}
			sizes = append(sizes, len(page))
			if len(page) == 0 || len(sizes) > total+1 {
				break
			}
			for _, m := range page {
				seen = append(seen, m.SequenceID)
			}
			after = page[len(page)-1].SequenceID
		}
		expect(t, "message pages of 3", fmt.Sprint(sizes, seen), fmt.Sprint([]int{3, 3, 1, 0}, []uint64{10, 20, 30, 40, 50, 60, 70}))
		return nil
	})
}

// testListOrders stores records whose insertion order, creation times and
// text forms all sort differently from the order each list promises, so
// only the promised order passes.
func testListOrders(t *testing.T, h Harness) {
	s := open(t, h)
	hi, lo := make([]byte, 16), make([]byte, 16)
	hi[0], lo[0] = 0x80, 0x7f // unsigned byte order: lo first; signed: hi first
	groups := []ports.Group{
		{ID: gid(2), CreatedAt: at(20)}, {ID: hi, CreatedAt: at(5)}, {ID: gid(3), CreatedAt: at(10)},
		{ID: gid(1), CreatedAt: at(30)}, {ID: lo, CreatedAt: at(40)},
	}
	kp := func(ref byte, created int) ports.KeyPackageRecord {
		r := keyPackage(int(ref))
		r.CreatedAt = at(created)
		return r
	}
	kps := []ports.KeyPackageRecord{kp(1, 30), kp(3, 20), kp(2, 10)} // creation order: 2, 3, 1
	held := func(seq uint64, firstSeen int) ports.HeldWelcome {
		w := welcome(seq)
		w.FirstSeenAt = at(firstSeen)
		return w
	}
	welcomes := []ports.HeldWelcome{held(100, 1), held(2, 3), held(10, 2)} // text order 10, 100, 2
	readds := []struct {
		g   []byte
		key string
	}{{gid(71), "inst-a"}, {gid(70), "inst-z"}, {gid(70), "inst-b"}}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, g := range groups {
			if err := tx.Groups().Insert(ctx, g); err != nil {
				return err
			}
		}
		for _, r := range kps {
			if err := tx.KeyPackages().Insert(ctx, r); err != nil {
				return err
			}
		}
		for _, w := range welcomes {
			if _, err := tx.HeldWelcomes().Put(ctx, w); err != nil {
				return err
			}
		}
		for _, r := range readds {
			if err := tx.Readds().Upsert(ctx, r.g, []byte(r.key), func(s *ports.ReaddStatus) error {
				s.Requested, s.RequestedAt = true, 1
				return nil
			}); err != nil {
				return err
			}
		}
		for _, q := range []uint64{10, 9, 100} { // text order 10, 100, 9
			if _, err := tx.IdentityCache().Put(ctx, ports.IdentityUpdateRecord{InboxID: "inbox-o", SequenceID: q, Update: []byte{byte(q)}}); err != nil {
				return err
			}
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		gs, err := tx.Groups().List(ctx, ports.GroupFilter{})
		if err != nil {
			return err
		}
		expect(t, "Groups.List by id as unsigned bytes", gs, []ports.Group{groups[3], groups[0], groups[2], groups[4], groups[1]})
		ks, err := tx.KeyPackages().List(ctx)
		if err != nil {
			return err
		}
		expect(t, "KeyPackages.List in creation (CreatedAt) order", ks, []ports.KeyPackageRecord{kps[2], kps[1], kps[0]})
		ws, err := tx.HeldWelcomes().List(ctx)
		if err != nil {
			return err
		}
		expect(t, "HeldWelcomes.List by sequence id as a number", ws, []ports.HeldWelcome{welcomes[1], welcomes[2], welcomes[0]})
		rs, err := tx.Readds().ListRequested(ctx)
		if err != nil {
			return err
		}
		var order []string
		for _, r := range rs {
			order = append(order, fmt.Sprintf("%s/%s", r.GroupID, r.InstallationKey))
		}
		expect(t, "Readds.ListRequested by group id, then installation key", order,
			[]string{string(gid(70)) + "/inst-b", string(gid(70)) + "/inst-z", string(gid(71)) + "/inst-a"})
		ids, err := tx.IdentityCache().List(ctx, "inbox-o", 1000)
		if err != nil {
			return err
		}
		var seqs []uint64
		for _, r := range ids {
			seqs = append(seqs, r.SequenceID)
		}
		expect(t, "IdentityCache.List ascending as numbers", seqs, []uint64{9, 10, 100})
		return nil
	})
}

// testNotFoundEverywhere: every lookup of something absent wraps
// ErrNotFound, in an empty store and beside similar present rows.
func testNotFoundEverywhere(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxFor(t)
	long := append(gid(65), gid(65)...) // a 32-byte id that starts with a stored 16-byte one
	calls := []struct {
		what string
		call func(tx ports.Tx) error
	}{
		{"Groups.Get", func(tx ports.Tx) error { _, err := tx.Groups().Get(ctx, long); return err }},
		{"Groups.Update", func(tx ports.Tx) error {
			return tx.Groups().Update(ctx, long, func(*ports.Group) error { return errors.New("fn called for an absent group") })
		}},
		{"KeyPackages.Get", func(tx ports.Tx) error { _, err := tx.KeyPackages().Get(ctx, []byte{0xaa}); return err }},
		{"KeyPackages.ByWrapperPublicKey", func(tx ports.Tx) error {
			_, err := tx.KeyPackages().ByWrapperPublicKey(ctx, []byte{0xbb})
			return err
		}},
		{"KeyPackages.Update", func(tx ports.Tx) error {
			return tx.KeyPackages().Update(ctx, []byte{0xaa}, func(*ports.KeyPackageRecord) error { return errors.New("fn called for an absent record") })
		}},
		{"KeyPackages.Destroy", func(tx ports.Tx) error { return tx.KeyPackages().Destroy(ctx, []byte{0xaa}, at(1)) }},
		{"HeldWelcomes.Get", func(tx ports.Tx) error { _, err := tx.HeldWelcomes().Get(ctx, 66); return err }},
		{"HeldWelcomes.Update", func(tx ports.Tx) error {
			return tx.HeldWelcomes().Update(ctx, 66, func(*ports.HeldWelcome) error { return errors.New("fn called for an absent Welcome") })
		}},
		{"LocalCommitLog.Last", func(tx ports.Tx) error { _, err := tx.LocalCommitLog().Last(ctx, long); return err }},
		{"LocalCommitLog.ByCommit", func(tx ports.Tx) error { _, err := tx.LocalCommitLog().ByCommit(ctx, long, 1, 5); return err }},
		{"RemoteCommitLog.Last", func(tx ports.Tx) error { _, err := tx.RemoteCommitLog().Last(ctx, long); return err }},
		{"RemoteCommitLog.ByCommit", func(tx ports.Tx) error { _, err := tx.RemoteCommitLog().ByCommit(ctx, long, 20); return err }},
		{"PublishProgress.Get", func(tx ports.Tx) error { _, err := tx.PublishProgress().Get(ctx, long); return err }},
		{"Readds.Get", func(tx ports.Tx) error { _, err := tx.Readds().Get(ctx, long, []byte("inst")); return err }},
		{"Blobs.Get", func(tx ports.Tx) error { _, err := tx.Blobs().Get(ctx, "mls", "state"); return err }},
	}
	messageCalls := []struct {
		what string
		call func(ms ports.Messages) error
	}{
		{"Messages.ByPayloadHash", func(ms ports.Messages) error { _, err := ms.ByPayloadHash(ctx, gid(65), []byte{7}); return err }},
		{"Messages.SetSequenceID", func(ms ports.Messages) error { return ms.SetSequenceID(ctx, 1<<40, 5, at(1)) }},
	}
	checkAll := func(when string) {
		for _, c := range calls {
			err := s.Tx(ctx, func(tx ports.Tx) error { return c.call(tx) })
			if !errors.Is(err, ports.ErrNotFound) {
				t.Errorf("%s, %s: %v, want an error wrapping ErrNotFound", c.what, when, err)
			}
		}
		for _, c := range messageCalls {
			err := s.Tx(ctx, func(tx ports.Tx) error {
				if mt, ok := tx.(ports.MessageTx); ok {
					return c.call(mt.Messages())
				}
				return ports.ErrNotFound // the message cases report the missing interface
			})
			if !errors.Is(err, ports.ErrNotFound) {
				t.Errorf("%s, %s: %v, want an error wrapping ErrNotFound", c.what, when, err)
			}
		}
	}
	checkAll("empty store")
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		g := gid(65)
		if err := tx.Groups().Insert(ctx, ports.Group{ID: g}); err != nil {
			return err
		}
		r := keyPackage(1)
		r.Ref, r.WrapperPublicKey = []byte{0xaa, 0xaa}, []byte{0xbb, 0xbb}
		if err := tx.KeyPackages().Insert(ctx, r); err != nil {
			return err
		}
		if _, err := tx.HeldWelcomes().Put(ctx, welcome(660)); err != nil {
			return err
		}
		if _, _, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, 5)); err != nil {
			return err
		}
		if _, err := tx.RemoteCommitLog().Insert(ctx, remoteEntry(g, 10)); err != nil {
			return err
		}
		if err := tx.PublishProgress().Put(ctx, ports.PublishState{GroupID: g}); err != nil {
			return err
		}
		if err := tx.Readds().Upsert(ctx, g, []byte("inst"), func(*ports.ReaddStatus) error { return nil }); err != nil {
			return err
		}
		if err := tx.Blobs().Put(ctx, "mls", "state/1", []byte("x")); err != nil {
			return err
		}
		if mt, ok := tx.(ports.MessageTx); ok {
			if _, _, err := mt.Messages().Insert(ctx, ports.Message{GroupID: g, Kind: ports.MessageApplication, Own: true, PayloadHash: []byte{7, 7}}); err != nil {
				return err
			}
		}
		return nil
	})
	checkAll("beside similar rows")
}

// testUpdateSemantics: an Update whose fn fails writes nothing and returns
// fn's error; an Update cannot move a record to another key.
func testUpdateSemantics(t *testing.T, h Harness) {
	s := open(t, h)
	boom := errors.New("fn refused")
	g, kp, w := fullGroup(67), keyPackage(67), welcome(67)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.Groups().Insert(ctx, g); err != nil {
			return err
		}
		if err := tx.KeyPackages().Insert(ctx, kp); err != nil {
			return err
		}
		_, err := tx.HeldWelcomes().Put(ctx, w)
		return err
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		err := tx.Groups().Update(ctx, g.ID, func(g *ports.Group) error { g.Cursor = 999; return boom })
		if !errors.Is(err, boom) {
			t.Errorf("Groups.Update whose fn failed returned %v, want fn's error", err)
		}
		err = tx.KeyPackages().Update(ctx, kp.Ref, func(r *ports.KeyPackageRecord) error { r.PublishSequenceID = 999; return boom })
		if !errors.Is(err, boom) {
			t.Errorf("KeyPackages.Update whose fn failed returned %v, want fn's error", err)
		}
		err = tx.HeldWelcomes().Update(ctx, w.SequenceID, func(w *ports.HeldWelcome) error { w.Attempts = 999; return boom })
		if !errors.Is(err, boom) {
			t.Errorf("HeldWelcomes.Update whose fn failed returned %v, want fn's error", err)
		}
		// fn tries to move the group to another id: refused or ignored.
		_ = tx.Groups().Update(ctx, g.ID, func(g *ports.Group) error { g.ID = gid(68); return nil })
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.Groups().Get(ctx, g.ID)
		if err != nil {
			return err
		}
		expect(t, "group after a failed update and an id change", got, g)
		if _, err := tx.Groups().Get(ctx, gid(68)); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("Groups.Update moved or copied the group to the id its fn set: Get = %v", err)
		}
		gotK, err := tx.KeyPackages().Get(ctx, kp.Ref)
		if err != nil {
			return err
		}
		expect(t, "key package after a failed update", gotK, kp)
		gotW, err := tx.HeldWelcomes().Get(ctx, w.SequenceID)
		if err != nil {
			return err
		}
		expect(t, "held Welcome after a failed update", gotW, w)
		return nil
	})
}

// testExactKeys: keys, namespaces, topics, inboxes and group ids match
// byte for byte; characters that are wildcards or escapes in SQL LIKE are
// ordinary bytes, and a key is never matched by its prefix.
func testExactKeys(t *testing.T, h Harness) {
	s := open(t, h)
	short := gid(69)
	long := append(gid(69), gid(69)...)
	binKey := string([]byte{0xff, 0x00, 0x80, 'k'})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, k := range []string{"a_1", "ab1", "a%", "a%1", "aX1", `a\1`, "state", "state/1"} {
			if err := tx.Blobs().Put(ctx, "ns", k, []byte(k)); err != nil {
				return err
			}
		}
		for _, ns := range []string{"ns2", "n"} {
			if err := tx.Blobs().Put(ctx, ns, "a_2", []byte(ns)); err != nil {
				return err
			}
		}
		if err := tx.Blobs().Delete(ctx, "ns", "state"); err != nil {
			return err
		}
		if _, err := tx.ProcessedEnvelopes().Mark(ctx, []byte("abc"), 1); err != nil {
			return err
		}
		for _, r := range []ports.IdentityUpdateRecord{{InboxID: "inbox-a", SequenceID: 1}, {InboxID: "inbox-ab", SequenceID: 5}} {
			if _, err := tx.IdentityCache().Put(ctx, r); err != nil {
				return err
			}
		}
		if err := tx.ReaderAdmission().RaiseBoundary(ctx, long, []byte(binKey), 9); err != nil {
			return err
		}
		return tx.ReaderAdmission().SetFloor(ctx, long, 4)
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, c := range []struct {
			prefix string
			want   []string
		}{
			{"a_", []string{"a_1"}},
			{"a%", []string{"a%", "a%1"}},
			{`a\`, []string{`a\1`}},
			{"state", []string{"state/1"}},
		} {
			got, err := tx.Blobs().Keys(ctx, "ns", c.prefix)
			if err != nil {
				return err
			}
			expect(t, fmt.Sprintf("Keys(%q, %q)", "ns", c.prefix), got, c.want)
		}
		for _, ns := range []string{"ns2", "n"} {
			got, err := tx.Blobs().Keys(ctx, ns, "")
			if err != nil {
				return err
			}
			expect(t, fmt.Sprintf("Keys(%q, \"\")", ns), got, []string{"a_2"})
		}
		if has, err := tx.ProcessedEnvelopes().Has(ctx, []byte("ab"), 1); err != nil || has {
			t.Errorf("Has(topic %q) = %v, %v after marking topic %q", "ab", has, err, "abc")
		}
		if has, err := tx.ProcessedEnvelopes().Has(ctx, []byte("abcd"), 1); err != nil || has {
			t.Errorf("Has(topic %q) = %v, %v after marking topic %q", "abcd", has, err, "abc")
		}
		got, err := tx.IdentityCache().List(ctx, "inbox-a", 100)
		if err != nil {
			return err
		}
		expect(t, `IdentityCache.List("inbox-a")`, got, []ports.IdentityUpdateRecord{{InboxID: "inbox-a", SequenceID: 1}})
		for inbox, want := range map[string]uint64{"inbox-a": 1, "inbox": 0, "inbox-ab": 5} {
			if hi, err := tx.IdentityCache().Highest(ctx, inbox); err != nil || hi != want {
				t.Errorf("Highest(%q) = %d, %v; want %d", inbox, hi, err, want)
			}
		}
		b, err := tx.ReaderAdmission().Boundaries(ctx, long)
		if err != nil {
			return err
		}
		expect(t, "boundaries keyed by the installation key's exact bytes", b, map[string]uint64{binKey: 9})
		if b, err := tx.ReaderAdmission().Boundaries(ctx, short); err != nil || len(b) != 0 {
			t.Errorf("boundaries of a group whose id is a prefix of another's: %v, %v", b, err)
		}
		if _, ok, err := tx.ReaderAdmission().Floor(ctx, short); err != nil || ok {
			t.Errorf("floor of a group whose id is a prefix of another's: ok=%v err=%v", ok, err)
		}
		return nil
	})
}
