package identity

import (
	"bytes"

	"github.com/regroup-mls/regroup/ports"
)

// Fold computes an inbox's association state through sequence id through
// from records of its identity-update topic (COMP-071, COMP-123): records
// are applied in ascending sequence id; a record after through, one that
// does not decode or verify, or one naming another inbox is ignored; an
// add appends its installation key unless it is associated already or was
// ever revoked; a revoke removes the key and bars it for good.
// The state's SequenceID is through.
func Fold(inboxID string, records []ports.IdentityUpdateRecord, through uint64) ports.AssociationState {
	sorted := append([]ports.IdentityUpdateRecord(nil), records...)
	for i := 1; i < len(sorted); i++ { // insertion sort: records arrive sorted
		for j := i; j > 0 && sorted[j].SequenceID < sorted[j-1].SequenceID; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	st := ports.AssociationState{InboxID: inboxID, SequenceID: through}
	revoked := map[string]bool{}
	for _, r := range sorted {
		if r.SequenceID > through {
			break
		}
		u, err := DecodeUpdate(r.Update)
		if err != nil || u.GetInboxId() != inboxID {
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

// validAt reports whether records hold a valid update of inboxID at exactly
// sequence id seq: the update an association state at seq names.
func validAt(inboxID string, records []ports.IdentityUpdateRecord, seq uint64) bool {
	for _, r := range records {
		if r.SequenceID != seq {
			continue
		}
		if u, err := DecodeUpdate(r.Update); err == nil && u.GetInboxId() == inboxID {
			return true
		}
	}
	return false
}
