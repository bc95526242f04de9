package mlstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

// groupID returns a 16-byte group id unique within the case.
func groupID(label string) []byte {
	id := make([]byte, 16)
	copy(id, "mlstest:"+label)
	return id
}

// create creates the group with m as its only member.
func (m *member) create(gid []byte) ports.GroupView {
	m.e.t.Helper()
	kp := m.keyPackage()
	var v ports.GroupView
	m.must("CreateGroup", func(ctx context.Context, tx ports.Tx) (err error) {
		v, err = m.mls.CreateGroup(ctx, tx, gid, kp, nil)
		return err
	})
	if v.Epoch != 0 || !v.Active || len(v.Members) != 1 || !bytes.Equal(v.GroupID, gid) {
		m.e.t.Fatalf("%s: created group: epoch %d, active %v, %d members, id %x", m.name, v.Epoch, v.Active, len(v.Members), v.GroupID)
	}
	m.checkOwnLeaf("created group", v)
	return v
}

// checkOwnLeaf requires v's own leaf to carry the member's signature key
// and inbox.
func (m *member) checkOwnLeaf(step string, v ports.GroupView) {
	m.e.t.Helper()
	for _, l := range v.Members {
		if l.LeafIndex == v.OwnLeaf {
			if !bytes.Equal(l.SignatureKey, m.pub) || l.InboxID != m.inbox {
				m.e.t.Fatalf("%s: %s: own leaf %d has key %x inbox %q, want %x %q", m.name, step, l.LeafIndex, l.SignatureKey, l.InboxID, m.pub, m.inbox)
			}
			return
		}
	}
	m.e.t.Fatalf("%s: %s: own leaf %d is not among the members", m.name, step, v.OwnLeaf)
}

// commit builds a commit and leaves it pending.
func (m *member) commit(gid []byte, opts ports.CommitOptions) ports.CommitOutput {
	m.e.t.Helper()
	var out ports.CommitOutput
	m.must("Commit", func(ctx context.Context, tx ports.Tx) (err error) {
		out, err = m.mls.Commit(ctx, tx, gid, opts)
		return err
	})
	if len(out.Commit) == 0 {
		m.e.t.Fatalf("%s: Commit returned no commit message", m.name)
	}
	if (len(opts.Add) > 0) != (len(out.Welcome) > 0) {
		m.e.t.Fatalf("%s: Commit adding %d members returned a Welcome of %d bytes", m.name, len(opts.Add), len(out.Welcome))
	}
	return out
}

// mergePending merges the member's pending commit.
func (m *member) mergePending(gid []byte) ports.GroupView {
	m.e.t.Helper()
	var v ports.GroupView
	m.must("MergePending", func(ctx context.Context, tx ports.Tx) (err error) {
		v, err = m.mls.MergePending(ctx, tx, gid)
		return err
	})
	return v
}

// commitAndMerge commits and merges at once, returning the commit.
func (m *member) commitAndMerge(gid []byte, opts ports.CommitOptions) (ports.CommitOutput, ports.GroupView) {
	m.e.t.Helper()
	out := m.commit(gid, opts)
	v := m.mergePending(gid)
	if !sameState(out.Staged, v) {
		m.e.t.Fatalf("%s: merged state differs from the one Commit announced:\n%s", m.name, diff(out.Staged, v))
	}
	return out, v
}

// process processes msg and returns the result or Process's error. The
// transaction commits even when Process fails, as a caller's does when it
// records a terminal rejection beside it (FORK-002): a failed Process must
// leave the group as it was either way.
func (m *member) process(gid, msg []byte) (ports.Processed, error) {
	m.e.t.Helper()
	var (
		p          ports.Processed
		processErr error
	)
	err := m.tx(func(ctx context.Context, tx ports.Tx) error {
		p, processErr = m.mls.Process(ctx, tx, gid, msg)
		return nil
	})
	if err != nil {
		m.e.t.Fatalf("%s: commit the transaction of Process: %v", m.name, err)
	}
	return p, processErr
}

// applyCommit processes another member's commit and merges it.
func (m *member) applyCommit(gid, commit []byte) ports.GroupView {
	m.e.t.Helper()
	p, err := m.process(gid, commit)
	if err != nil {
		m.e.t.Fatalf("%s: Process commit: %v", m.name, err)
	}
	if p.Kind != ports.ProcessedCommit || p.Staged == nil {
		m.e.t.Fatalf("%s: Process commit: kind %d, staged %v", m.name, p.Kind, p.Staged != nil)
	}
	v := m.mergeStaged(gid)
	if !sameState(*p.Staged, v) {
		m.e.t.Fatalf("%s: merged state differs from the staged one:\n%s", m.name, diff(*p.Staged, v))
	}
	return v
}

func (m *member) mergeStaged(gid []byte) ports.GroupView {
	m.e.t.Helper()
	var v ports.GroupView
	m.must("MergeStaged", func(ctx context.Context, tx ports.Tx) (err error) {
		v, err = m.mls.MergeStaged(ctx, tx, gid)
		return err
	})
	return v
}

// join stages and installs a Welcome made for kp.
func (m *member) join(welcome []byte, kp ports.KeyPackageBundle, signer *member) ports.GroupView {
	m.e.t.Helper()
	var st ports.StagedWelcome
	m.must("StageWelcome", func(ctx context.Context, tx ports.Tx) (err error) {
		st, err = m.mls.StageWelcome(ctx, tx, welcome, record(kp))
		return err
	})
	if st.HasPSKs || st.Handle == "" {
		m.e.t.Fatalf("%s: staged welcome: HasPSKs %v, handle %q", m.name, st.HasPSKs, st.Handle)
	}
	if st.Signer.InboxID != signer.inbox || !bytes.Equal(st.Signer.SignatureKey, signer.pub) {
		m.e.t.Fatalf("%s: staged welcome names signer %q %x, want %s", m.name, st.Signer.InboxID, st.Signer.SignatureKey, signer.name)
	}
	if _, err := m.view(st.Group.GroupID); !errors.Is(err, ports.ErrGroupNotFound) {
		m.e.t.Fatalf("%s: StageWelcome installed the group (Group: %v)", m.name, err)
	}
	var v ports.GroupView
	m.must("InstallWelcome", func(ctx context.Context, tx ports.Tx) (err error) {
		v, err = m.mls.InstallWelcome(ctx, tx, st.Handle)
		return err
	})
	if !sameState(st.Group, v) || !v.Active {
		m.e.t.Fatalf("%s: installed state differs from the staged one (active %v):\n%s", m.name, v.Active, diff(st.Group, v))
	}
	m.checkOwnLeaf("joined group", v)
	return v
}

// view returns the member's current view of the group.
func (m *member) view(gid []byte) (ports.GroupView, error) {
	var v ports.GroupView
	err := m.tx(func(ctx context.Context, tx ports.Tx) (err error) {
		v, err = m.mls.Group(ctx, tx, gid)
		return err
	})
	return v, err
}

func (m *member) mustView(gid []byte) ports.GroupView {
	m.e.t.Helper()
	v, err := m.view(gid)
	if err != nil {
		m.e.t.Fatalf("%s: Group: %v", m.name, err)
	}
	return v
}

// encrypt protects an application message.
func (m *member) encrypt(gid []byte, text, aad string) []byte {
	m.e.t.Helper()
	var ct []byte
	m.must("Encrypt", func(ctx context.Context, tx ports.Tx) (err error) {
		ct, err = m.mls.Encrypt(ctx, tx, gid, []byte(text), []byte(aad))
		return err
	})
	return ct
}

// receive processes an application message and requires its contents.
func (m *member) receive(gid, ct []byte, from *member, text, aad string) {
	m.e.t.Helper()
	p, err := m.process(gid, ct)
	if err != nil {
		m.e.t.Fatalf("%s: Process application message from %s: %v", m.name, from.name, err)
	}
	if p.Kind != ports.ProcessedApplication || string(p.Application) != text || string(p.AuthenticatedData) != aad {
		m.e.t.Fatalf("%s: application message from %s: kind %d, %q aad %q; want %q aad %q", m.name, from.name, p.Kind, p.Application, p.AuthenticatedData, text, aad)
	}
	if p.Sender.InboxID != from.inbox || !bytes.Equal(p.Sender.SignatureKey, from.pub) {
		m.e.t.Fatalf("%s: application message sender %q %x, want %s", m.name, p.Sender.InboxID, p.Sender.SignatureKey, from.name)
	}
}

// send encrypts at from and requires every member of to to read it.
func send(gid []byte, from *member, text string, to ...*member) {
	from.e.t.Helper()
	aad := "aad:" + text
	ct := from.encrypt(gid, text, aad)
	for _, r := range to {
		r.receive(gid, ct, from, text, aad)
	}
}

func (m *member) export(gid []byte, label string, exportContext []byte) []byte {
	m.e.t.Helper()
	var out []byte
	m.must("Export", func(ctx context.Context, tx ports.Tx) (err error) {
		out, err = m.mls.Export(ctx, tx, gid, label, exportContext, 32)
		return err
	})
	if len(out) != 32 {
		m.e.t.Fatalf("%s: Export returned %d bytes, want 32", m.name, len(out))
	}
	return out
}

// sameState reports whether two views describe the same epoch of the same
// group: epoch, epoch authenticator, tree hash, extensions and members.
func sameState(a, b ports.GroupView) bool {
	return diff(a, b) == ""
}

func diff(a, b ports.GroupView) string {
	var d string
	if !bytes.Equal(a.GroupID, b.GroupID) {
		d += fmt.Sprintf("group id %x / %x\n", a.GroupID, b.GroupID)
	}
	if a.Epoch != b.Epoch {
		d += fmt.Sprintf("epoch %d / %d\n", a.Epoch, b.Epoch)
	}
	// An active state always has an epoch authenticator; an inactive one
	// holds no secrets to derive it from.
	if (a.Active && len(a.EpochAuthenticator) == 0) || !bytes.Equal(a.EpochAuthenticator, b.EpochAuthenticator) {
		d += fmt.Sprintf("epoch authenticator %x / %x\n", a.EpochAuthenticator, b.EpochAuthenticator)
	}
	if len(a.TreeHash) == 0 || !bytes.Equal(a.TreeHash, b.TreeHash) {
		d += fmt.Sprintf("tree hash %x / %x\n", a.TreeHash, b.TreeHash)
	}
	if fmt.Sprint(a.Extensions) != fmt.Sprint(b.Extensions) {
		d += fmt.Sprintf("extensions %v / %v\n", a.Extensions, b.Extensions)
	}
	if fmt.Sprint(a.Members) != fmt.Sprint(b.Members) {
		d += fmt.Sprintf("members %v / %v\n", a.Members, b.Members)
	}
	return d
}

// agree requires every member to hold the same epoch epoch of the group,
// to be active in it, and to export the same secret.
func agree(gid []byte, epoch uint64, ms ...*member) []ports.GroupView {
	t := ms[0].e.t
	t.Helper()
	views := make([]ports.GroupView, len(ms))
	var secret []byte
	for i, m := range ms {
		views[i] = m.mustView(gid)
		if views[i].Epoch != epoch || !views[i].Active {
			t.Fatalf("%s: at epoch %d (active %v), want epoch %d and active", m.name, views[i].Epoch, views[i].Active, epoch)
		}
		if d := diff(views[0], views[i]); d != "" {
			t.Fatalf("epoch %d: %s and %s disagree:\n%s", epoch, ms[0].name, m.name, d)
		}
		m.checkOwnLeaf(fmt.Sprintf("epoch %d", epoch), views[i])
		x := m.export(gid, "mlstest", []byte{byte(epoch)})
		if i == 0 {
			secret = x
		} else if !bytes.Equal(secret, x) {
			t.Fatalf("epoch %d: %s and %s export different secrets", epoch, ms[0].name, m.name)
		}
	}
	return views
}

// leafOf returns the leaf index of m in v.
func leafOf(m *member, v ports.GroupView) uint32 {
	m.e.t.Helper()
	for _, l := range v.Members {
		if bytes.Equal(l.SignatureKey, m.pub) {
			return l.LeafIndex
		}
	}
	m.e.t.Fatalf("%s is not a member", m.name)
	return 0
}

// twoMembers builds a group of a and b at epoch 1: a creates it and adds b.
func (e *env) twoMembers(label string) (gid []byte, a, b *member) {
	e.t.Helper()
	gid = groupID(label)
	a, b = e.newMember("a"), e.newMember("b")
	a.create(gid)
	kp := b.keyPackage()
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	b.join(out.Welcome, kp, a)
	agree(gid, 1, a, b)
	return gid, a, b
}
