package identity

import (
	"bytes"
	"slices"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// Fold computes an inbox's association state through sequence id through
// from records of its identity-update topic (COMP-071, COMP-123): records
// are applied in ascending sequence id, the first record at a sequence id
// counting (as the store keeps it); a record after through, one that
// does not decode or verify, or one naming another inbox is ignored; an
// add appends its installation key unless it is associated already or was
// ever revoked; a revoke removes the key and bars it for good.
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
	for _, r := range records {
		if _, ok := h.updates[r.SequenceID]; ok || r.SequenceID > through {
			continue
		}
		u, err := DecodeUpdate(r.Update)
		if err != nil || u.GetInboxId() != h.inboxID {
			u = nil
		}
		h.updates[r.SequenceID] = u
		i, _ := slices.BinarySearch(h.seqs, r.SequenceID)
		h.seqs = slices.Insert(h.seqs, i, r.SequenceID)
	}
	return h
}

// validAt reports whether a valid update of the inbox is held at exactly
// sequence id seq: the update an association state at seq names.
func (h *held) validAt(seq uint64) bool { return h.updates[seq] != nil }

// fold applies the valid updates through sequence id through.
func (h *held) fold(through uint64) ports.AssociationState {
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
			if !revoked[string(k)] && indexOf(st.InstallationKeys, k) < 0 {
				st.InstallationKeys = append(st.InstallationKeys, bytes.Clone(k))
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
