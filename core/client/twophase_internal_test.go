package client

import (
	"context"
	"testing"
)

// COMP-435: an intent stored before intents recorded a held pending
// commit (this JSON was recorded from that version) loads as not yet read
// back, so it is published again and read back as before; a pending
// commit record round-trips.
func TestCOMP435_IntentBeforeHeldLoads(t *testing.T) {
	const recorded = `{"state":"pending","commit":"AAEAAQ==","group_info":"AAEABA==","recipients":[{"InstallationKey":"AQID","Wrapper":1,"WrapperPublicKey":"BAU=","PointeeAEADs":null}]}`
	tx := &blobTx{blobs: map[string][]byte{}}
	gid := []byte{1, 2, 3}
	tx.blobs[nsIntent+"/010203"] = []byte(recorded)
	in, err := loadIntent(context.Background(), tx, gid)
	if err != nil || in == nil || in.State != intentPending || in.Held != 0 || len(in.GroupInfo) != 4 {
		t.Fatalf("recorded intent read as %+v, %v", in, err)
	}
	pc := &pendingCommit{Seq: 7, Commit: []byte{1}, Own: true, Verdict: 0}
	if err := savePendingCommit(context.Background(), tx, gid, pc); err != nil {
		t.Fatal(err)
	}
	got, err := loadPendingCommit(context.Background(), tx, gid)
	if err != nil || got == nil || got.Seq != 7 || !got.Own {
		t.Fatalf("pending record read as %+v, %v", got, err)
	}
	tx.blobs[nsPendingCommit+"/010203"] = []byte("{")
	if _, err := loadPendingCommit(context.Background(), tx, gid); err == nil {
		t.Fatal("a corrupt pending record loaded")
	}
}
