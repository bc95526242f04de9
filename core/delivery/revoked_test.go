package delivery_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// ADR-0030 amendment rule 1 (device lists first), COMP-509 to COMP-513,
// on SQLite and PostgreSQL with real clients, the real validator and a
// real store. alice (a super admin) has two more installations: laptop,
// with a leaf in her groups, and tablet, without one. Her device list,
// published as identity updates, revokes both; the service takes a copy
// of an update it holds as a success. Outside catch-up laptop's commit
// is refused (COMP-512). After a restore that puts the group in
// catch-up: laptop's commit, uploaded by laptop or by bob, alice's
// commit uploaded by laptop, laptop's resync and tablet's recovery join
// are each refused with reason revoked (COMP-510, COMP-511); the next
// commit of laptop's chain is not taken either (COMP-513); alice's
// commit uploaded by bob is taken for the epoch laptop's was refused
// for.
func TestADR0030A1_DeviceListsFirst(t *testing.T) {
	eachStore(t, func(t *testing.T, mode string) {
		p := newTwoPhase(t, mode)
		alice, bob, carol := p.alice, p.bob, p.carol
		laptop := p.Member("alicelaptop", world.Config{RecoveryKey: alice.C.Identity().RecoveryKey})
		inCatchUp := p.groupBy(alice, laptop, bob, carol)
		outside := p.groupBy(alice, laptop, bob, carol)
		tablet := p.Member("alicetablet", world.Config{RecoveryKey: alice.C.Identity().RecoveryKey})

		t.Run("COMP509_ListUploadIdempotent", func(t *testing.T) {
			p.t, p.World.T = t, t
			p.revoke(alice, laptop.C.InstallationKey(), tablet.C.InstallationKey())
			// A copy of an update the service holds — the revocation, and
			// laptop's older add — is answered with its stored id.
			held := p.identityTopic(alice)
			var envs []*backendpb.ClientEnvelope
			var want []uint64
			for _, e := range held {
				envs = append(envs, e.GetEnvelope())
				want = append(want, e.GetSequenceId())
			}
			got, err := laptop.Transport.Publish(p.Ctx, envs)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("alice's device list uploaded again: %v, %v; want the stored ids %v", got, err, want)
			}
			if n := len(p.identityTopic(alice)); n != len(held) {
				t.Fatalf("the upload of updates the service holds stored %d more", n-len(held))
			}
		})

		t.Run("COMP512_OutsideCatchUp", func(t *testing.T) {
			p.t, p.World.T = t, t
			e0 := p.epoch(outside)
			c, gi := p.commit(laptop, outside, ports.CommitOptions{})
			p.refusedRevoked(laptop, outside, "laptop's commit", c, gi)
			if p.epoch(outside) != e0 {
				t.Fatal("laptop's refused commit moved the epoch")
			}
			c, gi = p.commit(alice, outside, ports.CommitOptions{})
			p.publish(alice, outside, c, gi)
			if p.epoch(outside) != e0+1 {
				t.Fatal("alice's commit did not take effect at once")
			}
		})

		if _, err := p.store.Restore(p.Ctx, deliverydb.RestoreOptions{Now: p.clk.Now()}); err != nil {
			t.Fatal(err)
		}
		p.svc.ForgetCatchUp() // the restart a restore implies
		if _, on, err := p.store.CatchUp(p.Ctx, inCatchUp); err != nil || !on {
			t.Fatalf("the group is not in catch-up after the restore: %v, %v", on, err)
		}

		t.Run("COMP510_SenderRevoked", func(t *testing.T) {
			p.t, p.World.T = t, t
			// The service holds the group in catch-up: bob's own commit is
			// taken only from another inbox (COMP-491).
			if own, _ := p.commit(bob, inCatchUp, ports.CommitOptions{}); !errors.Is(p.tryPublishErr(bob, inCatchUp, own), ports.ErrCatchUp) {
				t.Fatal("bob's own commit was not refused for catch-up")
			}
			c, _ := p.commit(laptop, inCatchUp, ports.CommitOptions{})
			p.refusedRevoked(laptop, inCatchUp, "laptop's commit uploaded by laptop", c)
			p.refusedRevoked(bob, inCatchUp, "laptop's commit uploaded by bob", c)
		})

		t.Run("COMP513_ChainDropped", func(t *testing.T) {
			p.t, p.World.T = t, t
			// laptop's chain: its commit, merged, and the next one.
			var first, next []byte
			laptop.Tx(func(tx ports.Tx) error {
				out, err := laptop.Engine.Commit(p.Ctx, tx, inCatchUp, ports.CommitOptions{ForcePath: true})
				if err != nil {
					return err
				}
				first = out.Commit
				_, err = laptop.Engine.MergePending(p.Ctx, tx, inCatchUp)
				return err
			})
			next, _ = p.commit(laptop, inCatchUp, ports.CommitOptions{})
			e0 := p.epoch(inCatchUp)
			p.refusedRevoked(bob, inCatchUp, "the chain's commit by laptop uploaded by bob", first)
			if err := p.tryPublishErr(bob, inCatchUp, next); !errors.Is(err, ports.ErrCatchUp) {
				t.Fatalf("the chain's next commit: %v; want ErrCatchUp (past the restored chain)", err)
			}
			if p.epoch(inCatchUp) != e0 {
				t.Fatal("the dropped chain moved the epoch")
			}
		})

		t.Run("COMP510_ResyncAndRecoveryJoin", func(t *testing.T) {
			p.t, p.World.T = t, t
			ctx, cancel := context.WithTimeout(p.Ctx, 20*time.Second)
			defer cancel()
			_, err := laptop.Conv(inCatchUp).Resync(ctx)
			p.wasRevoked("laptop's resync", err)
			_, err = tablet.C.RecoverGroup(ctx, inCatchUp)
			p.wasRevoked("tablet's recovery join", err)
		})

		t.Run("COMP510_UploaderRevoked", func(t *testing.T) {
			p.t, p.World.T = t, t
			e0 := p.epoch(inCatchUp)
			c, gi := p.commit(alice, inCatchUp, ports.CommitOptions{})
			p.refusedRevoked(laptop, inCatchUp, "alice's commit uploaded by laptop", c, gi)
			p.publish(bob, inCatchUp, c, gi)
			if p.epoch(inCatchUp) != e0+1 {
				t.Fatal("alice's commit uploaded by bob was not taken")
			}
		})
	})
}

// revoke publishes, as m, identity updates of m's inbox that revoke the
// installation keys, and returns their sequence ids.
func (p *twoPhase) revoke(m *world.Member, keys ...[]byte) []uint64 {
	p.t.Helper()
	topic, err := identity.Topic(m.C.InboxID())
	if err != nil {
		p.t.Fatal(err)
	}
	var envs []*backendpb.ClientEnvelope
	for _, k := range keys {
		u, err := identity.NewRevoke(m.C.Identity().RecoveryKey, k, time.Now().UnixNano())
		if err != nil {
			p.t.Fatal(err)
		}
		envs = append(envs, &backendpb.ClientEnvelope{TargetTopic: topic, Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u}})
	}
	ids, err := m.Transport.Publish(p.Ctx, envs)
	if err != nil {
		p.t.Fatal(err)
	}
	return ids
}

// identityTopic reads m's inbox's identity updates as the service holds
// them.
func (p *twoPhase) identityTopic(m *world.Member) []*backendpb.OriginatorEnvelope {
	p.t.Helper()
	topic, err := identity.Topic(m.C.InboxID())
	if err != nil {
		p.t.Fatal(err)
	}
	es, err := m.Transport.Query(p.Ctx, topic, 0, 1000)
	if err != nil {
		p.t.Fatal(err)
	}
	var out []*backendpb.OriginatorEnvelope
	for _, e := range es {
		if _, ok := e.GetEnvelope().GetPayload().(*backendpb.ClientEnvelope_IdentityUpdate); ok {
			out = append(out, e)
		}
	}
	return out
}

func (p *twoPhase) tryPublishErr(m *world.Member, id []byte, msgs ...[]byte) error {
	_, err := p.tryPublish(m, id, msgs...)
	return err
}

// refusedRevoked publishes msgs to the group as m and fails unless the
// service refuses them as signed or published by a revoked installation.
func (p *twoPhase) refusedRevoked(m *world.Member, id []byte, what string, msgs ...[]byte) {
	p.t.Helper()
	_, err := p.tryPublish(m, id, msgs...)
	p.wasRevoked(what, err)
}

// wasRevoked fails unless err and the service's last refusal are a
// refusal with reason revoked.
func (p *twoPhase) wasRevoked(what string, err error) {
	p.t.Helper()
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "revoked") {
		p.t.Fatalf("%s: %v; want a refusal wrapping ErrInvalidArgument naming the revocation", what, err)
	}
	if n := len(p.obs.refused); n == 0 || p.obs.refused[n-1] != delivery.RefusedRevoked {
		p.t.Fatalf("%s: the service's refusals %v; want the last with reason %q", what, p.obs.refused, delivery.RefusedRevoked)
	}
}
