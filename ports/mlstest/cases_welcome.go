package mlstest

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

var welcomeCases = []testCase{
	{"Welcome/StaleHandleCannotRollBack", testStaleHandle},
	{"Welcome/InstallDeletesSiblingHandles", testSiblings},
	{"Welcome/ListDiscardExpireAndViewAfterRestart", testWelcomeLifecycle},
	{"JOIN-087/UnsupportedWelcomeIsErrUnsupported", testUnsupportedWelcome},
}

// welcomes returns the member's engine as a [ports.MLSWelcomes], or skips.
func welcomes(e *env, m *member) ports.MLSWelcomes {
	e.t.Helper()
	w, ok := m.mls.(ports.MLSWelcomes)
	if !ok {
		e.t.Skip("engine does not implement ports.MLSWelcomes")
	}
	return w
}

// stage stages a Welcome and returns its staged view.
func (m *member) stage(welcome []byte, kp ports.KeyPackageBundle) ports.StagedWelcome {
	m.e.t.Helper()
	var st ports.StagedWelcome
	m.must("StageWelcome", func(ctx context.Context, tx ports.Tx) (err error) {
		st, err = m.mls.StageWelcome(ctx, tx, welcome, record(kp))
		return err
	})
	if st.Handle == "" {
		m.e.t.Fatalf("%s: StageWelcome returned no handle", m.name)
	}
	return st
}

// install installs a staged Welcome and returns the error.
func (m *member) install(handle string) (ports.GroupView, error) {
	var v ports.GroupView
	err := m.tx(func(ctx context.Context, tx ports.Tx) (err error) {
		v, err = m.mls.InstallWelcome(ctx, tx, handle)
		return err
	})
	return v, err
}

// testStaleHandle (COMP-115): b stages its Welcome twice (the same handle both
// times), installs it, merges a's next commit, and installs the handle
// again: that fails and b stays at the newer epoch; staged once more, the
// Welcome does not replace the newer state even when asked to.
func testStaleHandle(e *env) {
	gid := groupID("stale-handle")
	a, b := e.newMember("a"), e.newMember("b")
	a.create(gid)
	kp := b.keyPackage()
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	first, second := b.stage(out.Welcome, kp), b.stage(out.Welcome, kp)
	if first.Handle != second.Handle {
		e.t.Fatalf("one Welcome staged twice got handles %q and %q", first.Handle, second.Handle)
	}
	if _, err := b.install(first.Handle); err != nil {
		e.t.Fatalf("install: %v", err)
	}
	next, _ := a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	b.applyCommit(gid, next.Commit)
	before := b.mustView(gid)
	if _, err := b.install(second.Handle); err == nil {
		e.t.Fatal("a staged Welcome installed a second time, over a newer epoch")
	}
	b.unchanged("a stale Welcome handle", gid, before)
	agree(gid, 2, a, b)
	// Staged again, even an explicit replacement does not take the group
	// back to the Welcome's older epoch.
	again := b.stage(out.Welcome, kp)
	w := welcomes(e, b)
	err := b.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := w.InstallWelcomeWith(ctx, tx, again.Handle, ports.InstallOptions{Replace: true})
		return err
	})
	if !errors.Is(err, ports.ErrAlreadyExists) {
		e.t.Fatalf("replacing epoch 2 with a Welcome of epoch 1: %v, want ErrAlreadyExists", err)
	}
	b.unchanged("a replacement by an older Welcome", gid, before)
}

// testSiblings (COMP-115): a's first commit adding b is cleared and a second one
// merged, so b holds two Welcomes of the group at epoch 1; both stage
// under different handles; installing the second deletes the first,
// which then neither installs nor is listed.
func testSiblings(e *env) {
	gid := groupID("siblings")
	a, b := e.newMember("a"), e.newMember("b")
	a.create(gid)
	k1, k2 := b.keyPackage(), b.keyPackage()
	stale := a.commit(gid, ports.CommitOptions{Add: [][]byte{k1.KeyPackage}})
	a.must("ClearPending", func(ctx context.Context, tx ports.Tx) error { return a.mls.ClearPending(ctx, tx, gid) })
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{k2.KeyPackage}})
	s1, s2 := b.stage(stale.Welcome, k1), b.stage(out.Welcome, k2)
	if s1.Handle == s2.Handle {
		e.t.Fatal("two Welcomes got one handle")
	}
	if _, err := b.install(s2.Handle); err != nil {
		e.t.Fatal(err)
	}
	if _, err := b.install(s1.Handle); !errors.Is(err, ports.ErrNotFound) {
		e.t.Fatalf("install of a sibling handle after its group was installed: %v, want ErrNotFound", err)
	}
	if w, ok := b.mls.(ports.MLSWelcomes); ok {
		var list []ports.StagedWelcome
		b.must("StagedWelcomes", func(ctx context.Context, tx ports.Tx) (err error) {
			list, err = w.StagedWelcomes(ctx, tx, gid)
			return err
		})
		if len(list) != 0 {
			e.t.Fatalf("%d staged Welcomes of the group remain after its install", len(list))
		}
	}
	agree(gid, 1, a, b)
}

// testWelcomeLifecycle (COMP-115): staged Welcomes of two groups are listed per
// group and in all; one is read back by handle after a restart; a
// discarded one is gone; expiry discards exactly those staged before the
// given time.
func testWelcomeLifecycle(e *env) {
	a, b := e.newMember("a"), e.newMember("b")
	w := welcomes(e, b)
	g1, g2 := groupID("wl-1"), groupID("wl-2")
	var staged []ports.StagedWelcome
	for _, gid := range [][]byte{g1, g2} {
		a.create(gid)
		kp := b.keyPackage()
		out, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
		staged = append(staged, b.stage(out.Welcome, kp))
	}
	list := func(gid []byte) []ports.StagedWelcome {
		var l []ports.StagedWelcome
		b.must("StagedWelcomes", func(ctx context.Context, tx ports.Tx) (err error) {
			l, err = w.StagedWelcomes(ctx, tx, gid)
			return err
		})
		return l
	}
	if l := list(nil); len(l) != 2 {
		e.t.Fatalf("%d staged Welcomes listed, want 2", len(l))
	}
	if l := list(g1); len(l) != 1 || l[0].Handle != staged[0].Handle || !bytes.Equal(l[0].Group.GroupID, g1) {
		e.t.Fatalf("staged Welcomes of group 1: %+v", l)
	}
	if e.caps.Reopen {
		b.restart()
		w = welcomes(e, b)
	}
	var got ports.StagedWelcome
	b.must("StagedWelcome", func(ctx context.Context, tx ports.Tx) (err error) {
		got, err = w.StagedWelcome(ctx, tx, staged[1].Handle)
		return err
	})
	if d := diff(staged[1].Group, got.Group); d != "" || got.Signer.InboxID != a.inbox || !got.StagedAt.Equal(staged[1].StagedAt) {
		e.t.Fatalf("staged Welcome read back by handle differs (signer %q, staged at %v / %v):\n%s", got.Signer.InboxID, got.StagedAt, staged[1].StagedAt, d)
	}
	b.must("DiscardWelcome", func(ctx context.Context, tx ports.Tx) error { return w.DiscardWelcome(ctx, tx, staged[0].Handle) })
	if _, err := b.install(staged[0].Handle); !errors.Is(err, ports.ErrNotFound) {
		e.t.Fatalf("install of a discarded Welcome: %v, want ErrNotFound", err)
	}
	expire := func(before time.Time) int {
		var n int
		b.must("ExpireWelcomes", func(ctx context.Context, tx ports.Tx) (err error) {
			n, err = w.ExpireWelcomes(ctx, tx, before)
			return err
		})
		return n
	}
	if staged[1].StagedAt.IsZero() {
		e.t.Fatal("a staged Welcome reports no staging time")
	}
	if n := expire(staged[1].StagedAt); n != 0 || len(list(nil)) != 1 {
		e.t.Fatalf("expiry before the staging time discarded %d", n)
	}
	if n := expire(staged[1].StagedAt.Add(time.Second)); n != 1 || len(list(nil)) != 0 {
		e.t.Fatalf("expiry after the staging time discarded %d, want 1", n)
	}
	if _, err := b.install(staged[1].Handle); !errors.Is(err, ports.ErrNotFound) {
		e.t.Fatalf("install of an expired Welcome: %v, want ErrNotFound", err)
	}
}

// testUnsupportedWelcome (JOIN-087, COMP-116): a Welcome in an MLS version or a cipher suite
// the key package does not advertise fails with ErrUnsupported, so the
// join can hold it (JOIN-087) instead of rejecting it; nothing is staged.
func testUnsupportedWelcome(e *env) {
	gid := groupID("unsupported")
	a, b := e.newMember("a"), e.newMember("b")
	a.create(gid)
	kp := b.keyPackage()
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	// An MLSMessage starts with version (2 bytes) and wire format (2
	// bytes); a Welcome then with its cipher_suite (2 bytes).
	version := append([]byte{0x00, 0x02}, out.Welcome[2:]...)
	suite := append([]byte(nil), out.Welcome...)
	suite[4], suite[5] = 0x00, 0x01
	if bytes.Equal(suite, out.Welcome) {
		suite[5] = 0x02
	}
	for what, msg := range map[string][]byte{"MLS version 2": version, "another cipher suite": suite} {
		err := b.tx(func(ctx context.Context, tx ports.Tx) error {
			_, err := b.mls.StageWelcome(ctx, tx, msg, record(kp))
			return err
		})
		if !errors.Is(err, ports.ErrUnsupported) || errors.Is(err, ports.ErrInvalid) {
			e.t.Fatalf("Welcome of %s: %v, want ErrUnsupported alone", what, err)
		}
	}
	b.join(out.Welcome, kp, a)
	agree(gid, 1, a, b)
}
