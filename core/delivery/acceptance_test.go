package delivery

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// stateStore is memStore with public states: a test double of
// ports.PublicStateStore for the rule tests of this package
// (adapters/deliverydb is the real one, proven over regroupd).
type stateStore struct {
	*memStore
	states map[string]ports.StoredPublicState
	dedup  map[string]uint64
}

func newStateStore() *stateStore {
	return &stateStore{memStore: newMemStore(), states: map[string]ports.StoredPublicState{}, dedup: map[string]uint64{}}
}

// Append is memStore's with dedup keys (single envelopes only).
func (m *stateStore) Append(ctx context.Context, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	if len(envs) == 1 && envs[0].DedupKey != nil {
		m.mu.Lock()
		id, ok := m.dedup[string(envs[0].Topic)+string(envs[0].DedupKey)]
		m.mu.Unlock()
		if ok {
			return []uint64{id}, nil
		}
	}
	ids, err := m.memStore.Append(ctx, envs)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, e := range envs {
		if err == nil && e.DedupKey != nil {
			m.dedup[string(e.Topic)+string(e.DedupKey)] = ids[i]
		}
	}
	return ids, err
}

func (m *stateStore) PublicState(_ context.Context, group []byte) (ports.StoredPublicState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[string(group)]
	if !ok {
		return st, fmt.Errorf("state: %w", ports.ErrNotFound)
	}
	return st, nil
}

func (m *stateStore) AppendWithState(ctx context.Context, envs []ports.NewStoredEnvelope, adv []ports.PublicStateAdvance) ([]uint64, error) {
	m.mu.Lock()
	for _, a := range adv {
		st, ok := m.states[string(a.GroupID)]
		if a.Register == ok || ok && (st.Epoch != a.From || st.CommitSeq != a.FromCommitSeq) {
			m.mu.Unlock()
			return nil, ports.ErrStateMoved
		}
	}
	m.mu.Unlock()
	ids, err := m.Append(ctx, envs)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range adv {
		st := m.states[string(a.GroupID)]
		st.GroupID, st.Epoch = a.GroupID, a.Epoch
		if a.State != nil {
			st.State = a.State
		}
		if a.Commit >= 0 {
			st.CommitSeq, st.CommitDigest = ids[a.Commit], envs[a.Commit].DedupKey
		}
		if a.GroupInfo >= 0 {
			st.GroupInfoSeq = ids[a.GroupInfo]
		}
		m.states[string(a.GroupID)] = st
	}
	return ids, nil
}

// fakePublic is a validator over a toy encoding: a state is its epoch
// (8 bytes) and group id; a commit is a PublicMessage frame whose payload
// byte says what it does (0 good, 1 bad signature, 2 a metadata change
// that drops the conversation type); a GroupInfo is 0x0001 0x0004, the
// epoch and the group id.
type fakePublic struct{ applied sync.Map }

func fakeView(group []byte, epoch uint64, broken bool) ports.GroupView {
	d := metadata.Dictionary{Components: []metadata.Component{{ID: metadata.ComponentSuperAdminList, Data: metadata.EncodeInboxList([]string{"alice"})},
		{ID: metadata.ComponentGroupMembership, Data: metadata.EncodeMembership(map[string]*contentspb.GroupMembershipEntry_V1{"alice": {SequenceId: 1}})},
		{ID: metadata.ComponentConversationType, Data: metadata.EncodeConversationType(ports.ConversationGroup)}}}
	if broken {
		d.Components = d.Components[:2]
	}
	ext, _ := d.Extension()
	return ports.GroupView{GroupID: group, Epoch: epoch, Extensions: []ports.Extension{ext}, OwnLeaf: ports.NoLeaf,
		Members: []ports.Member{alice}}
}

var alice = ports.Member{InboxID: "alice", SignatureKey: bytes.Repeat([]byte{1}, 32), CredentialType: 1}

func fakeState(group []byte, epoch uint64) ports.PublicState {
	s := binary.BigEndian.AppendUint64(nil, epoch)
	return ports.PublicState{State: append(s, group...), View: fakeView(group, epoch, false)}
}

func fakeCommit(group []byte, epoch uint64, what byte) []byte {
	b := []byte{0, 1, 0, 1, byte(len(group))}
	b = append(b, group...)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = append(b, 1, 0, 0, 0, 0, 0, contentCommit, what)
	return b
}

func fakeGroupInfo(group []byte, epoch uint64) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{0, 1, 0, 4}, epoch), group...)
}

func (f *fakePublic) Open(_ context.Context, gi []byte) (ports.PublicState, error) {
	if !isGroupInfo(gi) || len(gi) < 12 {
		return ports.PublicState{}, &ports.PublicRefusal{Reason: ports.RefusedMalformed, Err: errors.New("not a group info")}
	}
	return fakeState(gi[12:], binary.BigEndian.Uint64(gi[4:])), nil
}

func (f *fakePublic) Apply(_ context.Context, state, commit []byte) (ports.PublicCommit, error) {
	epoch, group := binary.BigEndian.Uint64(state), state[8:]
	n := 5 + int(commit[4])
	if got := binary.BigEndian.Uint64(commit[n:]); got != epoch {
		return ports.PublicCommit{}, &ports.PublicRefusal{Reason: ports.RefusedEpoch, Err: &ports.WrongEpochError{}}
	}
	switch commit[len(commit)-1] {
	case 4:
		panic("validator bug")
	case 1:
		return ports.PublicCommit{}, &ports.PublicRefusal{Reason: ports.RefusedSignature, Err: errors.New("bad signature")}
	}
	next := fakeState(group, epoch+1)
	if commit[len(commit)-1] == 2 {
		next.View = fakeView(group, epoch+1, true)
	}
	f.applied.Store(string(commit), true)
	return ports.PublicCommit{Epoch: epoch, SenderType: ports.SenderMember, Sender: alice, Next: next}, nil
}

func (f *fakePublic) CheckGroupInfo(_ context.Context, state, gi []byte) error {
	if !bytes.Equal(gi[4:], state) {
		return &ports.PublicRefusal{Reason: ports.RefusedGroupInfo, Err: errors.New("another epoch")}
	}
	return nil
}

func (f *fakePublic) View(_ context.Context, state []byte) (ports.GroupView, error) {
	return fakeView(state[8:], binary.BigEndian.Uint64(state), false), nil
}

func groupEnv(kind ports.TopicKind, group, msg []byte) *backendpb.ClientEnvelope {
	return &backendpb.ClientEnvelope{TargetTopic: append([]byte{byte(kind)}, group...),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: msg}}
}

type refusals struct {
	noObserver
	mu   sync.Mutex
	seen []string
}

func (r *refusals) Refused(kind, reason string) {
	r.mu.Lock()
	r.seen = append(r.seen, kind+"/"+reason)
	r.mu.Unlock()
}

// COMP-371, COMP-372, COMP-374: a registration by GroupInfo, commits
// applied in order, a refused commit stored nowhere, a commit of a past
// epoch refused with ErrEpochConflict, the same commit published again
// answered with its id, a policy refusal, and a GroupInfo checked
// against the state its batch leads to.
func TestCOMP371_AcceptanceRules(t *testing.T) {
	ctx := context.Background()
	st := newStateStore()
	obs := &refusals{}
	svc := New(st, withClock(&Options{PublicGroups: &fakePublic{}, Observer: obs}))
	caller := ports.Caller{InstallationKey: bytes.Repeat([]byte{7}, 32)}
	group := bytes.Repeat([]byte{9}, 16)
	publish := func(envs ...*backendpb.ClientEnvelope) ([]uint64, error) { return svc.Publish(ctx, caller, envs) }
	stored := func() int {
		n, _ := st.Highest(ctx, append([]byte{0}, group...))
		return int(n)
	}

	// Unregistered: a commit passes unchecked (COMP-373).
	if _, err := publish(groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, 5, 1))); err != nil {
		t.Fatalf("a commit of an unregistered group: %v", err)
	}
	if _, err := publish(groupEnv(ports.TopicGroupInfo, group, fakeGroupInfo(group, 0))); err != nil {
		t.Fatalf("registration: %v", err)
	}
	if s, err := st.PublicState(ctx, group); err != nil || s.Epoch != 0 {
		t.Fatalf("registered state = %+v, %v", s, err)
	}
	before := stored()
	for _, c := range []struct {
		what   byte
		epoch  uint64
		class  error
		reason string
	}{
		{1, 0, ports.ErrInvalidArgument, "public_signature"},
		{2, 0, ports.ErrInvalidArgument, RefusedPolicy},
		{0, 3, ports.ErrEpochConflict, "public_epoch"},
	} {
		_, err := publish(groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, c.epoch, c.what)))
		if !errors.Is(err, c.class) || errors.Is(err, ports.ErrEpochConflict) && errors.Is(err, ports.ErrInvalidArgument) {
			t.Fatalf("commit %d of epoch %d: %v, want %v", c.what, c.epoch, err, c.class)
		}
		if got := obs.seen[len(obs.seen)-1]; got != "group_messages/"+c.reason {
			t.Fatalf("refusal reason %q, want %q", got, c.reason)
		}
		if stored() != before {
			t.Fatalf("a refused commit was stored")
		}
	}
	// A commit and the GroupInfo of its epoch in one batch.
	good := fakeCommit(group, 0, 0)
	ids, err := publish(groupEnv(ports.TopicGroupMessages, group, good), groupEnv(ports.TopicGroupInfo, group, fakeGroupInfo(group, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := st.PublicState(ctx, group); s.Epoch != 1 || s.CommitSeq != ids[0] || s.GroupInfoSeq != ids[1] {
		t.Fatalf("state after the commit = %+v, want epoch 1, commit %d, group info %d", s, ids[0], ids[1])
	}
	// The same commit again: answered, not refused (a retried publish).
	again, err := publish(groupEnv(ports.TopicGroupMessages, group, good))
	if err != nil || again[0] != ids[0] {
		t.Fatalf("the same commit again: %v, %v; want id %d", again, err, ids[0])
	}
	// Another commit of epoch 0: another commit won.
	if _, err := publish(groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, 0, 3))); !errors.Is(err, ports.ErrEpochConflict) {
		t.Fatalf("a second commit of epoch 0: %v, want ErrEpochConflict", err)
	}
	// A GroupInfo of the epoch before the batch's commit is refused.
	_, err = publish(groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, 1, 0)), groupEnv(ports.TopicGroupInfo, group, fakeGroupInfo(group, 1)))
	if !errors.Is(err, ports.ErrInvalidArgument) || obs.seen[len(obs.seen)-1] != "group_info/public_group-info" {
		t.Fatalf("a stale GroupInfo beside a commit: %v (%v)", err, obs.seen)
	}
	if s, _ := st.PublicState(ctx, group); s.Epoch != 1 {
		t.Fatalf("a refused batch advanced the state to %d", s.Epoch)
	}
	// A validator that panics refuses the commit; the service lives on.
	if _, err := publish(groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, 1, 4))); !errors.Is(err, ports.ErrInvalidArgument) ||
		obs.seen[len(obs.seen)-1] != "group_messages/public_malformed" {
		t.Fatalf("a commit the validator panics on: %v", err)
	}
	// Private and application messages pass.
	if _, err := publish(groupEnv(ports.TopicGroupMessages, group, []byte{0, 1, 0, 2, 1, 9, 0, 0, 0, 0, 0, 0, 0, 9, 1})); err != nil {
		t.Fatalf("a private message: %v", err)
	}
	// A GroupInfo topic takes GroupInfos only.
	if _, err := publish(groupEnv(ports.TopicGroupInfo, group, good)); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a commit on the GroupInfo topic: %v", err)
	}
}

// COMP-374: without a store that keeps public states, acceptance cannot
// run and publishes fail as unavailable rather than pass unchecked.
func TestCOMP374_AcceptanceNeedsStateStore(t *testing.T) {
	svc := New(newMemStore(), withClock(&Options{PublicGroups: &fakePublic{}}))
	_, err := svc.Publish(context.Background(), ports.Caller{InstallationKey: bytes.Repeat([]byte{7}, 32)},
		[]*backendpb.ClientEnvelope{groupEnv(ports.TopicGroupMessages, bytes.Repeat([]byte{1}, 16), []byte{1})})
	if !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("publish: %v, want ErrUnavailable", err)
	}
}
