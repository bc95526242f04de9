package rogue

import (
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

// JoinAsOutsider joins the group by an external commit built on the
// newest GroupInfo the delivery service serves on the group's GroupInfo
// topic, with a leaf whose credential names inbox and whose signature key
// is the member's installation key. With recover false it removes no
// leaf: the plain external join that is neither a resync nor a recovery
// join (COMP-396). With recover true it removes a leaf of inbox, as a
// recovery join does: under an inbox the installation is not associated
// with, a forged one. It publishes the commit and returns its sequence id.
func (r Member) JoinAsOutsider(groupID []byte, inbox string, recover bool) (uint64, error) {
	ctx := r.W.Ctx
	env, err := r.Transport.QueryNewest(ctx, append([]byte{byte(ports.TopicGroupInfo)}, groupID...))
	if err != nil {
		return 0, fmt.Errorf("outsider join: group info: %w", err)
	}
	gi := env.GetEnvelope().GetGroupMessage()
	rec, err := r.keyPackageUnder(inbox, r.C.Identity().InstallationKey)
	if err != nil {
		return 0, fmt.Errorf("outsider join: key package: %w", err)
	}
	var commit []byte
	err = r.Store.Tx(ctx, func(tx ports.Tx) error {
		out, err := r.Engine.JoinExternal(ctx, tx, gi, ports.ExternalJoinOptions{Recover: recover,
			KeyPackage: ports.KeyPackageBundle{KeyPackage: rec.KeyPackage, Ref: rec.Ref, InitPrivateKey: rec.InitPrivateKey,
				EncryptionPrivateKey: rec.EncryptionPrivateKey}})
		commit = out.Commit
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("outsider join: %w", err)
	}
	return r.publish(groupID, commit, "outsider join")
}
