package recovery_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// TestCOMP452_OwnersReadd: an owner's re-add (Recovery.Readd) is the
// readd commit of FORK-062 under an answered request's checks: a member
// that is not a permitted readder (FORK-080) is refused, as is a key no
// leaf holds; the super admin's re-add raises the group's minimum
// protocol version first (FORK-063), removes the installation's leaf and
// adds its fresh key package, and the re-added member rejoins at the
// group's epoch with a new leaf.
func TestCOMP452_OwnersReadd(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice, bob, carol := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)
	world.SyncAll(all...)

	if _, err := bob.Conv(id).Readd(w.Ctx, key(carol)); !errors.Is(err, recovery.ErrReaddRefused) {
		t.Fatalf("bob, no super admin, re-adds carol: %v, want ErrReaddRefused", err)
	}
	if _, err := alice.Conv(id).Readd(w.Ctx, bytes.Repeat([]byte{7}, 32)); !errors.Is(err, recovery.ErrReaddRefused) {
		t.Fatalf("alice re-adds a key no leaf holds: %v, want ErrReaddRefused", err)
	}
	if _, err := alice.Conv(id).Readd(w.Ctx, key(alice)); !errors.Is(err, recovery.ErrReaddRefused) {
		t.Fatalf("alice re-adds herself: %v, want ErrReaddRefused", err)
	}
	rawCommit(t, alice, id, func(v ports.GroupView) ports.CommitOptions {
		d, err := metadata.FromExtensions(v.Extensions)
		if err != nil {
			t.Fatal(err)
		}
		ext, err := d.Set(metadata.ComponentMinProtocol, []byte("1.5.9")).Extension()
		if err != nil {
			t.Fatal(err)
		}
		return ports.CommitOptions{GroupContextExtensions: []ports.Extension{ext}}
	})
	world.SyncAll(all...)
	if _, err := alice.Conv(id).Readd(w.Ctx, key(carol)); err != nil {
		t.Fatalf("alice re-adds carol: %v", err)
	}
	world.SyncAll(all...)
	world.SyncAll(all...)
	world.Agree(t, id, all...)
	if !carol.Info(id).Active {
		t.Fatal("carol is not active after the re-add")
	}
	if readds := readdsOf(t, bob, id, key(carol)); len(readds) != 1 {
		t.Fatalf("readd commits of carol: %v, want one", readds)
	}
	if v := carol.Info(id).MinProtocolVersion; v != recovery.ReaddVersion.String() {
		t.Fatalf("minimum protocol version after the re-add: %q, want %v", v, recovery.ReaddVersion)
	}
}
