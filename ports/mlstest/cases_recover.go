package mlstest

import (
	"bytes"
	"context"
	"errors"

	"github.com/regroup-mls/regroup/ports"
)

var recoverCases = []testCase{
	{"External/RecoverReplacesALostLeafOfTheInbox", testExternalRecover},
}

// testExternalRecover (COMP-399): b2, a new installation of b's inbox,
// joins by external commit with Recover: the commit removes b's leaf (the
// same credential under another key) and adds b2's; a applies it and both
// agree. Recover for an inbox with no leaf in the tree wraps ErrNotFound,
// and Recover with Resync wraps ErrInvalidArgument.
func testExternalRecover(e *env) {
	gid, a, b := e.twoMembers("recover")
	lost := leafOf(b, a.mustView(gid))
	b2 := e.newMember("b2")
	b2.inbox = b.inbox
	gi := a.groupInfo(gid)
	c := e.newMember("c")
	err := c.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := external(e, c).JoinExternal(ctx, tx, gi, ports.ExternalJoinOptions{KeyPackage: c.keyPackage(), Recover: true})
		return err
	})
	if !errors.Is(err, ports.ErrNotFound) {
		e.t.Fatalf("Recover into a group without the joiner's inbox: %v, want ErrNotFound", err)
	}
	err = b2.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := external(e, b2).JoinExternal(ctx, tx, gi, ports.ExternalJoinOptions{KeyPackage: b2.keyPackage(), Recover: true, Resync: true})
		return err
	})
	if !errors.Is(err, ports.ErrInvalidArgument) {
		e.t.Fatalf("Recover with Resync: %v, want ErrInvalidArgument", err)
	}
	out := b2.joinExternal(gi, ports.ExternalJoinOptions{KeyPackage: b2.keyPackage(), Recover: true})
	p, err := a.process(gid, out.Commit)
	if err != nil {
		e.t.Fatalf("a: Process b2's recovery join: %v", err)
	}
	var removed bool
	for _, x := range p.Proposals {
		removed = removed || (x.Type == ports.ProposalRemove && x.Removed.LeafIndex == lost && bytes.Equal(x.Removed.SignatureKey, b.pub))
	}
	if !removed || len(p.Staged.Members) != 2 || p.SenderType != ports.SenderNewMemberCommit || !bytes.Equal(p.Sender.SignatureKey, b2.pub) {
		e.t.Fatalf("b2's recovery join: sender %d %x, proposals %+v, %d members", p.SenderType, p.Sender.SignatureKey, p.Proposals, len(p.Staged.Members))
	}
	a.mergeStaged(gid)
	b2.mergePending(gid)
	agree(gid, 2, a, b2)
	send(gid, b2, "recovered", a)
}
