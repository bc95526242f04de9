package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// FuzzPeekGroupInfo reads the group id and epoch of whatever a GroupInfo
// topic serves before the engine verifies it: it never panics, and what
// it accepts names MLS 1.0, the group_info wire format and, read
// independently from the same bytes, the group id and epoch of a
// GroupContext whose group id is short enough to read here.
func FuzzPeekGroupInfo(f *testing.F) {
	f.Add([]byte{0, 1, 0, 4, 0, 1, 0, 1, 2, 0xaa, 0xbb, 0, 0, 0, 0, 0, 0, 0, 9})
	f.Add([]byte{0, 1, 0, 4, 0, 1, 0, 1, 0x40, 2, 0xaa, 0xbb, 0, 0, 0, 0, 0, 0, 0, 9})
	f.Add([]byte{0, 1, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, ok := peekGroupInfo(b)
		if !ok {
			return
		}
		if len(b) < 8 || binary.BigEndian.Uint16(b) != 1 || binary.BigEndian.Uint16(b[2:]) != wireGroupInfo || binary.BigEndian.Uint16(b[4:]) != 1 {
			t.Fatalf("accepted what is no MLS 1.0 GroupInfo: %x", b)
		}
		if n := int(b[8]); n < 64 {
			if !bytes.Equal(h.groupID, b[9:9+n]) || binary.BigEndian.Uint64(b[9+n:]) != h.epoch {
				t.Fatalf("group %x epoch %d read from %x", h.groupID, h.epoch, b)
			}
		}
	})
}

// COMP-395: an intent stored before intents kept their GroupInfo (this
// JSON was recorded from that version) still loads, and republishes its
// commit alone.
func TestCOMP395_IntentWithoutGroupInfoLoads(t *testing.T) {
	const recorded = `{"state":"pending","commit":"AAEAAQ==","welcome":"AAEAAw==","recipients":[{"InstallationKey":"AQID","Wrapper":1,"WrapperPublicKey":"BAU=","PointeeAEADs":null}],"deliver":true}`
	tx := &blobTx{blobs: map[string][]byte{}}
	gid := []byte{1, 2, 3}
	tx.blobs[nsIntent+"/010203"] = []byte(recorded)
	in, err := loadIntent(context.Background(), tx, gid)
	if err != nil || in == nil {
		t.Fatalf("load recorded intent: %v, %v", in, err)
	}
	if in.State != intentPending || !bytes.Equal(in.Commit, []byte{0, 1, 0, 1}) || !in.Deliver || in.GroupInfo != nil {
		t.Fatalf("recorded intent read as %+v", in)
	}
	if envs := commitBatch(gid, in.Commit, in.GroupInfo); len(envs) != 1 {
		t.Fatalf("an intent without GroupInfo publishes %d envelopes, want its commit alone", len(envs))
	}
	if envs := commitBatch(gid, in.Commit, []byte{9}); len(envs) != 2 || !bytes.Equal(envs[1].GetTargetTopic(), groupInfoTopic(gid)) {
		t.Fatalf("a commit with its GroupInfo publishes %v", envs)
	}
}

// blobTx is a ports.Tx holding only blobs, by "namespace/key".
type blobTx struct {
	ports.Tx
	blobs map[string][]byte
}

func (t *blobTx) Blobs() ports.Blobs { return t }

func (t *blobTx) Get(_ context.Context, ns, key string) ([]byte, error) {
	if v, ok := t.blobs[ns+"/"+key]; ok {
		return v, nil
	}
	return nil, ports.ErrNotFound
}

func (t *blobTx) Put(_ context.Context, ns, key string, v []byte) error {
	t.blobs[ns+"/"+key] = v
	return nil
}

func (t *blobTx) Delete(_ context.Context, ns, key string) error {
	delete(t.blobs, ns+"/"+key)
	return nil
}

func (t *blobTx) Keys(context.Context, string, string) ([]string, error) { return nil, nil }

// COMP-395: a GroupInfo above Options.MaxGroupInfoBytes is left out of
// the commit's batch, which a delivery service would refuse whole.
func TestCOMP395_OversizedGroupInfoLeftOut(t *testing.T) {
	c := &Client{opts: (&Options{MaxGroupInfoBytes: 4}).withDefaults(), logger: slog.New(slog.DiscardHandler)}
	if got := c.groupInfoToSend([]byte{1}, []byte{1, 2, 3, 4}); len(got) != 4 {
		t.Fatalf("a GroupInfo at the limit: %x", got)
	}
	if got := c.groupInfoToSend([]byte{1}, []byte{1, 2, 3, 4, 5}); got != nil {
		t.Fatalf("a GroupInfo above the limit: %x", got)
	}
	if d := (&Options{}).withDefaults().MaxGroupInfoBytes; d != 1<<20-1<<10 {
		t.Fatalf("default MaxGroupInfoBytes %d", d)
	}
}
