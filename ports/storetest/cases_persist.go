package storetest

import (
	"context"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

var persistCases = []testCase{
	{"PROC-008/PersistsAcrossReopen", testPersists},
}

// fullGroup sets every field of a group to a value other than its zero.
func fullGroup(n int) ports.Group {
	return ports.Group{
		ID: gid(n), ConversationType: ports.ConversationDM, DMID: "dm:inbox-a:inbox-b",
		Consent: ports.ConsentAllowed, Active: true, Cursor: 41, JoinAnchor: 17, Membership: 3,
		GroupRoot: []byte("0123456789abcdef0123456789abcdef"), ForkState: ports.ForkForked,
		MaybeForked: true, MaybeForkedReason: "divergent authenticator", MinProtocolVersion: "1.2.0",
		RestoredPlaceholder: true, CreatedAt: at(1), UpdatedAt: at(2),
	}
}

// testPersists writes through every repository, closes the store, opens
// it again and reads everything back unchanged.
func testPersists(t *testing.T, h Harness) {
	needReopen(t, h)
	s := open(t, h)
	g := fullGroup(1)
	local := localEntry(g.ID, 3, 9)
	local.RemovedThisInstallation, local.Legacy = true, true
	remote := remoteEntry(g.ID, 12)
	publish := ports.PublishState{GroupID: g.ID, ConfirmedThrough: 1, EligibleFrom: 1, LegacyRecovered: true, Publisher: true}
	kp := keyPackage(4)
	kp.PublishSequenceID, kp.PublishConfirmedAt, kp.PublishRefused = 8, at(3), true
	held := welcome(6)
	held.Deadline = at(99)
	readd := ports.ReaddStatus{GroupID: g.ID, InstallationKey: []byte("inst"), Requested: true, RequestedAt: 4, RespondedAt: 2, NotBefore: at(5), UpdatedAt: at(6)}
	ident := ports.IdentityUpdateRecord{InboxID: "inbox-a", SequenceID: 3, Update: []byte("update")}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.Groups().Insert(ctx, g); err != nil {
			return err
		}
		stored, _, err := tx.LocalCommitLog().Append(ctx, local)
		if err != nil {
			return err
		}
		local = stored
		if _, err := tx.RemoteCommitLog().Insert(ctx, remote); err != nil {
			return err
		}
		if err := tx.RemoteCommitLog().SetReadPosition(ctx, g.ID, 13); err != nil {
			return err
		}
		if err := tx.PublishProgress().Put(ctx, publish); err != nil {
			return err
		}
		if err := tx.ReaderAdmission().SetFloor(ctx, g.ID, 7); err != nil {
			return err
		}
		if err := tx.ReaderAdmission().RaiseBoundary(ctx, g.ID, []byte("inst"), 11); err != nil {
			return err
		}
		if err := tx.KeyPackages().Insert(ctx, kp); err != nil {
			return err
		}
		if _, err := tx.HeldWelcomes().Put(ctx, held); err != nil {
			return err
		}
		if err := tx.Readds().Upsert(ctx, g.ID, readd.InstallationKey, func(s *ports.ReaddStatus) error { *s = readd; return nil }); err != nil {
			return err
		}
		if _, err := tx.ProcessedEnvelopes().Mark(ctx, []byte("topic"), 21); err != nil {
			return err
		}
		if _, err := tx.IdentityCache().Put(ctx, ident); err != nil {
			return err
		}
		return tx.Blobs().Put(ctx, "mls", "group/1", []byte("engine state"))
	})
	s = reopen(t, h, s)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.Groups().Get(ctx, g.ID)
		expect(t, "group", got, g)
		expectNoErr(t, err)
		l, err := tx.LocalCommitLog().List(ctx, g.ID, 0, 0)
		expect(t, "local entries", l, []ports.LocalCommitLogEntry{local})
		expectNoErr(t, err)
		r, err := tx.RemoteCommitLog().List(ctx, g.ID, 0, 0)
		expect(t, "accepted entries", r, []ports.RemoteCommitLogEntry{remote})
		expectNoErr(t, err)
		pos, err := tx.RemoteCommitLog().ReadPosition(ctx, g.ID)
		expect(t, "read position", pos, uint64(13))
		expectNoErr(t, err)
		p, err := tx.PublishProgress().Get(ctx, g.ID)
		expect(t, "publish progress", p, publish)
		expectNoErr(t, err)
		floor, ok, err := tx.ReaderAdmission().Floor(ctx, g.ID)
		expect(t, "floor", [2]any{floor, ok}, [2]any{uint64(7), true})
		expectNoErr(t, err)
		b, err := tx.ReaderAdmission().Boundaries(ctx, g.ID)
		expect(t, "boundaries", b, map[string]uint64{"inst": 11})
		expectNoErr(t, err)
		k, err := tx.KeyPackages().Get(ctx, kp.Ref)
		expect(t, "key package", k, kp)
		expectNoErr(t, err)
		w, err := tx.HeldWelcomes().Get(ctx, held.SequenceID)
		expect(t, "held Welcome", w, held)
		expectNoErr(t, err)
		rd, err := tx.Readds().Get(ctx, g.ID, readd.InstallationKey)
		expect(t, "readd status", rd, readd)
		expectNoErr(t, err)
		marked, err := tx.ProcessedEnvelopes().Has(ctx, []byte("topic"), 21)
		expect(t, "processed envelope", marked, true)
		expectNoErr(t, err)
		id, err := tx.IdentityCache().List(ctx, "inbox-a", 100)
		expect(t, "identity updates", id, []ports.IdentityUpdateRecord{ident})
		expectNoErr(t, err)
		v, err := tx.Blobs().Get(ctx, "mls", "group/1")
		expect(t, "blob", string(v), "engine state")
		expectNoErr(t, err)
		return nil
	})
}

func expectNoErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}
