package delivery_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// COMP-520: a group whose catch-up stopped takes one commit more, its
// super admin's pointer to a successor group, changing nothing else,
// whoever publishes it; it stays stopped after it. Real
// engines and store, on SQLite and PostgreSQL; the service is started
// anew after the restore, as regroupd is.
func TestCOMP520_StoppedGroupTakesOnlyTheSuccessorPointer(t *testing.T) {
	eachStore(t, func(t *testing.T, mode string) {
		p := newTwoPhase(t, mode)
		alice, bob, carol, id := p.group()
		if _, err := p.store.Restore(p.Ctx, deliverydb.RestoreOptions{Now: p.clk.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := p.store.StopCatchUp(p.Ctx, id, p.clk.Now()); err != nil {
			t.Fatal(err)
		}
		restarted := p.newService(p.store)
		stopped := p.epoch(id)
		// commit builds m's commit setting the components in set (none:
		// a key update), publishes it as by, and merges it on m's engine
		// when taken.
		var last []byte
		var lastIDs []uint64
		commit := func(m, by *world.Member, set map[uint16][]byte) error {
			t.Helper()
			var out ports.CommitOutput
			m.Tx(func(tx ports.Tx) error {
				v, err := m.Engine.Group(p.Ctx, tx, id)
				if err != nil {
					return err
				}
				opts := ports.CommitOptions{ForcePath: true}
				if len(set) > 0 {
					d, err := metadata.FromExtensions(v.Extensions)
					if err != nil {
						return err
					}
					for c, data := range set {
						d = d.Set(c, data)
					}
					if opts.GroupContextExtensions, err = d.Apply(v.Extensions); err != nil {
						return err
					}
				}
				out, err = m.Engine.Commit(p.Ctx, tx, id, opts)
				return err
			})
			last = out.Commit
			ids, err := restarted.Publish(p.Ctx, ports.Caller{InstallationKey: by.C.InstallationKey()},
				[]*backendpb.ClientEnvelope{groupEnvOf(p, id, out.Commit)})
			lastIDs = ids
			m.Tx(func(tx ports.Tx) error {
				if err != nil {
					return m.Engine.ClearPending(p.Ctx, tx, id)
				}
				_, err := m.Engine.MergePending(p.Ctx, tx, id)
				return err
			})
			return err
		}
		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ports.ErrCatchUp) {
				t.Errorf("%s in the stopped group: %v; want ErrCatchUp", what, err)
			}
		}
		successor := bytes.Repeat([]byte{0x51}, 16)
		pointer := map[uint16][]byte{metadata.ComponentSuccessor: successor}
		refused("carol's key update", commit(carol, carol, nil))
		refused("alice's key update", commit(alice, alice, nil))
		refused("carol's pointer (no super admin's)", commit(carol, carol, pointer))
		refused("bob's pointer published by alice, a super admin", commit(bob, alice, pointer))
		refused("alice's pointer that renames the group too", commit(alice, alice,
			map[uint16][]byte{metadata.ComponentSuccessor: successor, metadata.ComponentName: []byte("moved")}))
		if got := p.epoch(id); got != stopped {
			t.Fatalf("the stopped group moved to epoch %d on refused commits; want %d", got, stopped)
		}

		if err := commit(alice, bob, pointer); err != nil { // bob forwards it

			t.Fatalf("alice's pointer to the successor in the stopped group: %v", err)
		}
		// Published again (a retry): the store answers its id.
		taken := lastIDs
		if ids, err := restarted.Publish(p.Ctx, ports.Caller{InstallationKey: alice.C.InstallationKey()},
			[]*backendpb.ClientEnvelope{groupEnvOf(p, id, last)}); err != nil || len(ids) != 1 || ids[0] != taken[0] {
			t.Errorf("the pointer published again: %v, %v; want its id %d", ids, err, taken[0])
		}
		world.SyncAll(bob, carol)
		for _, m := range []*world.Member{bob, carol} {
			if got, err := m.Conv(id).Successor(p.Ctx); err != nil || !bytes.Equal(got, successor) {
				t.Errorf("%s reads the successor %x, %v; want %x", m.Name, got, err, successor)
			}
		}
		refused("alice's second pointer", commit(alice, alice, map[uint16][]byte{metadata.ComponentSuccessor: bytes.Repeat([]byte{0x52}, 16)}))
		refused("alice's key update after the pointer", commit(alice, alice, nil))
		if got := p.epoch(id); got != stopped+1 {
			t.Errorf("the stopped group at epoch %d; want %d (the pointer alone taken)", got, stopped+1)
		}
		if st, ok, err := p.store.CatchUpOf(p.Ctx, id); err != nil || !ok || !st.Stopped {
			t.Errorf("the group's catch-up after the pointer: %+v, %v, %v; want still stopped", st, ok, err)
		}
	})
}

func groupEnvOf(p *twoPhase, id, msg []byte) *backendpb.ClientEnvelope {
	return &backendpb.ClientEnvelope{TargetTopic: p.topic(ports.TopicGroupMessages, id),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: msg}}
}
