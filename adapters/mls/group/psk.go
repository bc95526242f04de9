package group

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// pskSecret resolves ids and combines them into psk_secret (§8.4). External
// PSKs come from the store, resumption PSKs (usage application) from this
// group's recent epochs.
func (g *Group) pskSecret(ids []message.PreSharedKeyID) ([]byte, error) {
	psks := make([]keyschedule.PSK, 0, len(ids))
	for _, id := range ids {
		var secret []byte
		var ok bool
		switch id.Type {
		case message.PSKExternal:
			if g.psks != nil {
				secret, ok = g.psks.ExternalPSK(id.ID)
			}
		case message.PSKResumption:
			if id.Usage == message.UsageApplication && string(id.GroupID) == string(g.gc.GroupID) && g.resume != nil {
				secret, ok = g.resume[id.Epoch]
			} else if r := g.predecessor; r != nil && id.Usage == r.usage && string(id.GroupID) == string(r.groupID) && id.Epoch == r.epoch {
				secret, ok = r.secret, true
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w: type %d id %x epoch %d", ErrUnknownPSK, id.Type, id.ID, id.Epoch)
		}
		psks = append(psks, keyschedule.PSK{ID: id, Secret: secret})
	}
	return keyschedule.PSKSecret(g.suite, psks)
}
