package identity

import (
	"bytes"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// Fold computes an inbox's association state through sequence id through
// from records of its identity-update topic (COMP-071, COMP-123): records
// are applied in ascending sequence id, the first record at a sequence id
// counting (as the store keeps it); a record after through, one that
// does not decode or verify, or one naming another inbox is ignored; an
// add appends its installation key unless it is associated already or was
// ever revoked, and, when an installation authorised it, unless that
// installation is associated at that point of the fold (COMP-260); a
// revoke removes the key and bars it for good.
// The state's SequenceID is through.
func Fold(inboxID string, records []ports.IdentityUpdateRecord, through uint64) ports.AssociationState {
	return newHeld(inboxID).add(records, through).fold(through)
}

// held is an inbox's held records, each decoded and verified once: the
// updates by sequence id, nil for a record that does not decode, verify or
// name the inbox.
type held struct {
	inboxID string
	seqs    []uint64 // ascending
	updates map[uint64]*identitypb.IdentityUpdate
}

func newHeld(inboxID string) *held {
	return &held{inboxID: inboxID, updates: map[uint64]*identitypb.IdentityUpdate{}}
}

// add decodes and verifies the records through sequence id through that
// it does not hold yet; the first record held at a sequence id stays, as
// in the store.
func (h *held) add(records []ports.IdentityUpdateRecord, through uint64) *held {
	addAll([]*held{h}, [][]ports.IdentityUpdateRecord{records}, []uint64{through}, nil)
	return h
}

// verified is an update decoded and verified earlier in the same call,
// with the bytes it is stored as.
type verified struct {
	bytes  []byte
	update *identitypb.IdentityUpdate
}

// addAll is add for several inboxes at once: records[i] through sequence
// id through[i] into hs[i], the signatures of all of them verified in one
// batch. known, when not nil, holds for each inbox the updates already
// verified by sequence id: a record with exactly those bytes there is
// not verified again.
func addAll(hs []*held, records [][]ports.IdentityUpdateRecord, through []uint64, known []map[uint64]verified) {
	type slot struct {
		h   *held
		seq uint64
	}
	var slots []slot
	var us []*identitypb.IdentityUpdate
	for i, h := range hs {
		var seen map[uint64]verified
		if known != nil {
			seen = known[i]
		}
		for _, r := range records[i] {
			if _, ok := h.updates[r.SequenceID]; ok || r.SequenceID > through[i] {
				continue
			}
			var u *identitypb.IdentityUpdate
			if k, ok := seen[r.SequenceID]; ok && bytes.Equal(k.bytes, r.Update) {
				u = k.update
			} else if d := new(identitypb.IdentityUpdate); proto.Unmarshal(r.Update, d) == nil && d.GetInboxId() == h.inboxID {
				slots, us = append(slots, slot{h, r.SequenceID}), append(us, d) // held once verified
			}
			h.updates[r.SequenceID] = u
			j, _ := slices.BinarySearch(h.seqs, r.SequenceID)
			h.seqs = slices.Insert(h.seqs, j, r.SequenceID)
		}
	}
	for j, err := range verifyUpdates(us) {
		if err == nil {
			slots[j].h.updates[slots[j].seq] = us[j]
		}
	}
}

// validAt reports whether a valid update of the inbox is held at exactly
// sequence id seq: the update an association state at seq names.
func (h *held) validAt(seq uint64) bool { return h.updates[seq] != nil }

// fold applies the valid updates through sequence id through.
func (h *held) fold(through uint64) ports.AssociationState {
	return h.foldInto(through, nil)
}

// foldAuthorizers is fold that also returns, for every key an add
// associated (revoked later or not), the installation key that authorised
// that add (empty: the recovery key). A key is associated at most once.
func (h *held) foldAuthorizers(through uint64) (ports.AssociationState, map[string][]byte) {
	auths := map[string][]byte{}
	return h.foldInto(through, auths), auths
}

// foldInto is fold, recording authorisers in auths when it is not nil.
func (h *held) foldInto(through uint64, auths map[string][]byte) ports.AssociationState {
	st := ports.AssociationState{InboxID: h.inboxID, SequenceID: through}
	revoked := map[string]bool{}
	for _, seq := range h.seqs {
		if seq > through {
			break
		}
		u := h.updates[seq]
		if u == nil {
			continue
		}
		if a := u.GetAddInstallation(); a != nil {
			k := a.GetInstallationKey()
			if auth := a.GetAuthorizerKey(); len(auth) > 0 && indexOf(st.InstallationKeys, auth) < 0 {
				continue // COMP-260: the authoriser is revoked or was never associated
			}
			if !revoked[string(k)] && indexOf(st.InstallationKeys, k) < 0 {
				st.InstallationKeys = append(st.InstallationKeys, bytes.Clone(k))
				if auths != nil {
					auths[string(k)] = a.GetAuthorizerKey()
				}
			}
			continue
		}
		k := u.GetRevokeInstallation().GetInstallationKey()
		revoked[string(k)] = true
		if i := indexOf(st.InstallationKeys, k); i >= 0 {
			st.InstallationKeys = append(st.InstallationKeys[:i], st.InstallationKeys[i+1:]...)
		}
	}
	return st
}

func indexOf(keys [][]byte, k []byte) int {
	for i, x := range keys {
		if bytes.Equal(x, k) {
			return i
		}
	}
	return -1
}

// Association is one installation an inbox associates, with the
// installation that authorised its add, nil when the recovery key did.
type Association struct {
	InstallationKey []byte
	AuthorizedBy    []byte
}

// Associations returns the installations the inbox associates at sequence
// id through, in [Fold]'s order, each with the installation that
// authorised the add that associated it.
func Associations(inboxID string, records []ports.IdentityUpdateRecord, through uint64) []Association {
	st, auths := newHeld(inboxID).add(records, through).foldAuthorizers(through)
	out := make([]Association, len(st.InstallationKeys))
	for i, k := range st.InstallationKeys {
		out[i] = Association{InstallationKey: k, AuthorizedBy: bytes.Clone(auths[string(k)])}
	}
	return out
}

// AddedBy returns the installation keys the inbox associates at sequence
// id through whose add the installation key authorizer authorised, or an
// installation it authorised did, in the order they were added (COMP-263).
// They stay associated when authorizer is revoked: the user revokes each
// one that is not theirs.
func AddedBy(inboxID string, records []ports.IdentityUpdateRecord, through uint64, authorizer []byte) [][]byte {
	st, auths := newHeld(inboxID).add(records, through).foldAuthorizers(through)
	var out [][]byte
	for _, k := range st.InstallationKeys {
		// Walk k's chain of authorisers up to the recovery key; each key
		// is associated once, so the chain ends.
		for by := auths[string(k)]; len(by) > 0; by = auths[string(by)] {
			if bytes.Equal(by, authorizer) {
				out = append(out, bytes.Clone(k))
				break
			}
		}
	}
	return out
}
