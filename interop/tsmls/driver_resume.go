package tsmls

import "context"

// ReInit commits an inline ReInit of the member's group to groupID (suite
// 3, no extensions) and returns the commit; the member's group is then
// suspended until [Member.ReInitCreate] or [Driver.JoinReInit].
func (m *Member) ReInit(ctx context.Context, groupID []byte) ([]byte, error) {
	var res struct {
		Commit Hex `json:"commit"`
	}
	err := m.d.Call(ctx, "reinit", map[string]any{"handle": m.Handle, "groupId": Hex(groupID)}, &res)
	return res.Commit, err
}

// Successor is a group ts-mls created from another: its creator, the
// Welcome (an MLSMessage) and the ratchet tree, which ts-mls does not put
// in the Welcome.
type Successor struct {
	Member      *Member
	Welcome     []byte
	RatchetTree []byte
}

type successor struct {
	Handle      string `json:"handle"`
	Welcome     Hex    `json:"welcome"`
	RatchetTree Hex    `json:"ratchetTree"`
}

func (m *Member) successor(res *successor) *Successor {
	return &Successor{Member: &Member{d: m.d, Handle: res.Handle}, Welcome: res.Welcome, RatchetTree: res.RatchetTree}
}

func hexes(in [][]byte) []Hex {
	out := make([]Hex, len(in))
	for i, b := range in {
		out[i] = b
	}
	return out
}

// ReInitCreate creates the successor of the member's suspended group with
// the ts-mls key package kp and the other members' key packages
// (MLSMessages).
func (m *Member) ReInitCreate(ctx context.Context, kp *KeyPackage, members [][]byte, groupID []byte) (*Successor, error) {
	var res successor
	err := m.d.Call(ctx, "reinitCreate", map[string]any{"handle": m.Handle, "kpHandle": kp.Handle, "members": hexes(members),
		"groupId": Hex(groupID)}, &res)
	return m.successor(&res), err
}

// JoinReInit joins the successor of the member's suspended group from a
// Welcome for the key package kp.
func (m *Member) JoinReInit(ctx context.Context, kp *KeyPackage, welcome []byte) (*Member, error) {
	var res successor
	err := m.d.Call(ctx, "joinReinit", map[string]any{"handle": m.Handle, "kpHandle": kp.Handle, "welcome": Hex(welcome)}, &res)
	return &Member{d: m.d, Handle: res.Handle}, err
}

// Branch creates a subgroup of the member's group (RFC 9420 §11.3) with
// the ts-mls key package kp and the other members' key packages.
func (m *Member) Branch(ctx context.Context, kp *KeyPackage, members [][]byte, groupID []byte) (*Successor, error) {
	var res successor
	err := m.d.Call(ctx, "branch", map[string]any{"handle": m.Handle, "kpHandle": kp.Handle, "members": hexes(members),
		"groupId": Hex(groupID)}, &res)
	return m.successor(&res), err
}

// JoinBranch joins a subgroup branched from the member's group.
func (m *Member) JoinBranch(ctx context.Context, kp *KeyPackage, welcome []byte) (*Member, error) {
	var res successor
	err := m.d.Call(ctx, "joinBranch", map[string]any{"handle": m.Handle, "kpHandle": kp.Handle, "welcome": Hex(welcome)}, &res)
	return &Member{d: m.d, Handle: res.Handle}, err
}

// ProposeAddExternal makes a ts-mls key package for identity and signs
// the joiner's own Add of it (sender type new_member_proposal) for the
// group of groupInfo; it returns the proposal and the key package.
func (d *Driver) ProposeAddExternal(ctx context.Context, groupInfo, identity []byte) ([]byte, *KeyPackage, error) {
	var res struct {
		Message  Hex    `json:"message"`
		KPHandle string `json:"kpHandle"`
	}
	err := d.Call(ctx, "proposeAddExternal", map[string]any{"groupInfo": Hex(groupInfo), "identity": Hex(identity)}, &res)
	return res.Message, &KeyPackage{Handle: res.KPHandle}, err
}
