package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
)

// world is a set of clients sharing one in-process delivery service on
// SQLite, each with its own SQLite store: the embedded injector.
type world struct {
	t   *testing.T
	ctx context.Context
	dir string
	svc *delivery.Service
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	svc, cleanup, err := regroup.OpenEmbeddedService(ctx, filepath.Join(dir, "delivery.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return &world{t: t, ctx: ctx, dir: dir, svc: svc}
}

// member is one installation in the world.
type member struct {
	w    *world
	name string
	c    *client.Client
}

// newMember makes an installation: of a new inbox, or of the inbox whose
// recovery key is given. Its key package is published at once.
func (w *world) newMember(name string, recovery ed25519.PrivateKey) *member {
	w.t.Helper()
	c, cleanup, err := regroup.NewEmbedded(w.ctx, regroup.EmbeddedConfig{Dir: filepath.Join(w.dir, name), Service: w.svc,
		Identity: regroup.IdentityConfig{RecoveryKey: recovery}})
	if err != nil {
		w.t.Fatalf("%s: %v", name, err)
	}
	w.t.Cleanup(cleanup)
	if _, err := c.KeyPackages().Publish(w.ctx); err != nil {
		w.t.Fatalf("%s: publish key package: %v", name, err)
	}
	return &member{w: w, name: name, c: c}
}

func (m *member) sync() {
	m.w.t.Helper()
	if err := m.c.SyncAll(m.w.ctx); err != nil {
		m.w.t.Fatalf("%s: sync: %v", m.name, err)
	}
}

func (m *member) conv(id []byte) *client.Conversation {
	m.w.t.Helper()
	cv, err := m.c.Conversation(m.w.ctx, id)
	if err != nil {
		m.w.t.Fatalf("%s: conversation %x: %v", m.name, id, err)
	}
	return cv
}

func (m *member) info(id []byte) client.Info {
	m.w.t.Helper()
	info, err := m.conv(id).Info(m.w.ctx)
	if err != nil {
		m.w.t.Fatalf("%s: info: %v", m.name, err)
	}
	return info
}

// agree checks that every member holds the group at the same epoch and
// epoch authenticator.
func agree(t *testing.T, id []byte, ms ...*member) {
	t.Helper()
	first := ms[0].info(id)
	for _, m := range ms[1:] {
		got := m.info(id)
		if got.Epoch != first.Epoch || !bytes.Equal(got.EpochAuthenticator, first.EpochAuthenticator) {
			t.Fatalf("%s at epoch %d (%x), %s at epoch %d (%x)", ms[0].name, first.Epoch, first.EpochAuthenticator[:4],
				m.name, got.Epoch, got.EpochAuthenticator[:4])
		}
	}
}

func texts(t *testing.T, m *member, id []byte) []string {
	t.Helper()
	msgs, err := m.conv(id).Messages(m.w.ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, msg := range msgs {
		if msg.Kind == ports.MessageApplication {
			out = append(out, string(msg.Content))
		}
	}
	return out
}

func TestCreateAddSendReceive(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.newMember("alice", nil), w.newMember("bob", nil)
	g, err := alice.c.CreateGroup(w.ctx, client.GroupOptions{Name: "ops", Members: []string{bob.c.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	bob.sync()
	agree(t, g.ID(), alice, bob)
	if _, err := g.Send(w.ctx, []byte("hello bob")); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.conv(g.ID()).Send(w.ctx, []byte("hello alice")); err != nil {
		t.Fatal(err)
	}
	alice.sync()
	bob.sync()
	for _, m := range []*member{alice, bob} {
		if got := texts(t, m, g.ID()); len(got) != 2 || got[0] != "hello bob" || got[1] != "hello alice" {
			t.Errorf("%s holds %q", m.name, got)
		}
	}
}
