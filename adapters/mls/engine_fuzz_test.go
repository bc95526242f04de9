package mls_test

import (
	"context"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// FuzzProcess feeds hostile messages to ports.MLS Process: every failure is
// one of the three classes, never a panic.
func FuzzProcess(f *testing.F) {
	ctx := context.Background()
	a, b := newInstallationTB(f, "inbox-a"), newInstallationTB(f, "inbox-b")
	gid := []byte("fuzz")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackageTB(f), nil); err != nil {
		f.Fatal(err)
	}
	kpb := b.keyPackageTB(f)
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kpb.KeyPackage}})
	if err != nil {
		f.Fatal(err)
	}
	_, _ = a.engine.MergePending(ctx, a.tx, gid)
	st, err := b.engine.StageWelcome(ctx, b.tx, out.Welcome, ports.KeyPackageRecord{KeyPackage: kpb.KeyPackage, InitPrivateKey: kpb.InitPrivateKey, EncryptionPrivateKey: kpb.EncryptionPrivateKey})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := b.engine.InstallWelcome(ctx, b.tx, st.Handle); err != nil {
		f.Fatal(err)
	}
	app, _ := a.engine.Encrypt(ctx, a.tx, gid, []byte("hi"), nil)
	f.Add(app)
	c, _ := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true})
	f.Add(c.Commit)
	f.Fuzz(func(t *testing.T, in []byte) {
		_, err := b.engine.Process(ctx, b.tx, gid, in)
		if err != nil && !isClass(err) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}

func isClass(err error) bool {
	for _, c := range []error{ports.ErrWrongEpoch, ports.ErrUndecryptable, ports.ErrInvalid} {
		if errorsIs(err, c) {
			return true
		}
	}
	return false
}
