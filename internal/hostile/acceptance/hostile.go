// Package acceptance is a hostile member for the tests of two-phase commit
// acceptance (ADR-0030): a real regroup client (a world member) with a
// decorator over its transport and the test hook of its real MLS engine
// (internal/mlstesthook), so it can publish commits with corrupted tags,
// encrypt path secrets correctly to chosen members only, lie as a
// witness, send false stuck reports and publish its own dropped commit
// again. Its own client goes on as an honest one would; the tests judge
// only what the honest members hold.
package acceptance

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/regroup-mls/regroup/internal/mlstesthook"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Member is a hostile member.
type Member struct {
	*world.Member
	tr *transport
}

// New makes a hostile member of w.
func New(w *world.World, name string) *Member {
	h := &Member{}
	h.Member = w.Member(name, world.Config{Transport: func(tr ports.Transport) ports.Transport {
		h.tr = &transport{Transport: tr}
		return h.tr
	}})
	return h
}

// transport decorates the member's transport: it records the commits the
// member publishes and can turn its OK reports into refusals.
type transport struct {
	ports.Transport
	mu   sync.Mutex
	lie  string
	last []*backendpb.ClientEnvelope
}

func (t *transport) witness() ports.Witness { return t.Transport.(ports.Witness) }

// Report lies when asked: an OK becomes a refusal with the lie's class.
func (t *transport) Report(ctx context.Context, r ports.Report) error {
	t.mu.Lock()
	lie := t.lie
	t.mu.Unlock()
	if lie != "" && r.Verdict == ports.VerdictOK {
		r.Verdict, r.Reason = ports.VerdictRefused, lie
	}
	return t.witness().Report(ctx, r)
}

func (t *transport) Lift(ctx context.Context, l ports.Lift) error { return t.witness().Lift(ctx, l) }

// LieAsWitness makes the member refuse, with reason class reason, every
// commit its client would report OK on; "" ends the lie.
func (h *Member) LieAsWitness(reason string) {
	h.tr.mu.Lock()
	defer h.tr.mu.Unlock()
	h.tr.lie = reason
}

// FalseStuck reports the confirmed commit at seq stuck with reason,
// although the member processed it.
func (h *Member) FalseStuck(groupID []byte, seq uint64, reason string) error {
	return h.tr.witness().Report(h.W.Ctx, ports.Report{GroupID: groupID, CommitSeq: seq, Verdict: ports.VerdictStuck, Reason: reason})
}

// Lie is a way a hostile commit is wrong.
type Lie struct {
	// CorruptTag flips the last byte of the commit: a PublicMessage's
	// membership tag.
	CorruptTag bool
	// PathTo, when set, encrypts the UpdatePath's path secrets correctly
	// to the leaves it lists only; every other resolution node receives a
	// random secret.
	PathTo []uint32
}

// Commit builds a commit with an UpdatePath on the member's engine with
// the lie, clears it there (the member never merges it), publishes it
// with the GroupInfo of its epoch, and returns its sequence id.
func (h *Member) Commit(groupID []byte, lie Lie) (uint64, error) {
	if lie.PathTo != nil {
		own, err := h.ownLeaf(groupID)
		if err != nil {
			return 0, err
		}
		restore := mlstesthook.SetPathFilter(func(g []byte, committer, node uint32) bool {
			if string(g) != string(groupID) || committer != own {
				return true
			}
			return node%2 == 0 && slices.Contains(lie.PathTo, node/2)
		})
		defer restore()
	}
	var commit, gi []byte
	err := h.Store.Tx(h.W.Ctx, func(tx ports.Tx) error {
		out, err := h.Engine.Commit(h.W.Ctx, tx, groupID, ports.CommitOptions{ForcePath: true})
		if err != nil {
			return err
		}
		commit, gi = out.Commit, out.GroupInfo
		return h.Engine.ClearPending(h.W.Ctx, tx, groupID)
	})
	if err != nil {
		return 0, fmt.Errorf("hostile commit: %w", err)
	}
	if lie.CorruptTag {
		commit = flipLast(commit)
	}
	envs := []*backendpb.ClientEnvelope{
		{TargetTopic: topic(ports.TopicGroupMessages, groupID), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: commit}},
		{TargetTopic: topic(ports.TopicGroupInfo, groupID), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: gi}},
	}
	h.tr.mu.Lock()
	h.tr.last = envs
	h.tr.mu.Unlock()
	seqs, err := h.Transport.Publish(h.W.Ctx, envs)
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// Republish publishes the member's last hostile commit again, its
// GroupInfo with it.
func (h *Member) Republish() (uint64, error) {
	h.tr.mu.Lock()
	envs := h.tr.last
	h.tr.mu.Unlock()
	if envs == nil {
		return 0, fmt.Errorf("hostile: no commit to publish again")
	}
	seqs, err := h.Transport.Publish(h.W.Ctx, envs)
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

func (h *Member) ownLeaf(groupID []byte) (leaf uint32, err error) {
	err = h.Store.Tx(h.W.Ctx, func(tx ports.Tx) error {
		v, err := h.Engine.Group(h.W.Ctx, tx, groupID)
		leaf = v.OwnLeaf
		return err
	})
	return leaf, err
}

// Leaves returns the leaf indices of inbox's installations in the
// member's view of the group.
func (h *Member) Leaves(groupID []byte, inbox string) (out []uint32, err error) {
	err = h.Store.Tx(h.W.Ctx, func(tx ports.Tx) error {
		v, err := h.Engine.Group(h.W.Ctx, tx, groupID)
		for _, m := range v.Members {
			if m.InboxID == inbox {
				out = append(out, m.LeafIndex)
			}
		}
		return err
	})
	return out, err
}

func flipLast(b []byte) []byte {
	out := slices.Clone(b)
	out[len(out)-1] ^= 0x5a
	return out
}

func topic(kind ports.TopicKind, id []byte) []byte { return append([]byte{byte(kind)}, id...) }
