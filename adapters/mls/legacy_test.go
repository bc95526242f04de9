package mls_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/ports"
)

// stagedV2 is a Welcome staged by an engine that stored a staged Welcome
// as the joined group's version-2 state under a random handle.
const stagedV2 = "testdata/staged-welcome-v2.txt"

// TestRecordStagedWelcomeV2 writes stagedV2 the way that engine staged a
// Welcome (group.Join, then the state's Marshal); it runs only when
// REGROUP_RECORD_STATE is set.
func TestRecordStagedWelcomeV2(t *testing.T) {
	if os.Getenv("REGROUP_RECORD_STATE") == "" {
		t.Skip("set REGROUP_RECORD_STATE=1 to record " + stagedV2)
	}
	ctx := context.Background()
	gid := []byte("staged-v2-group")
	a, b := newInstallation(t, "inbox-a"), newInstallation(t, "inbox-b")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackage(t), nil); err != nil {
		t.Fatal(err)
	}
	kp := b.keyPackage(t)
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := framing.Decode(out.Welcome)
	if err != nil {
		t.Fatal(err)
	}
	var k message.KeyPackage
	if err := codec.Unmarshal(kp.KeyPackage, &k); err != nil {
		t.Fatal(err)
	}
	g, err := group.Join(suite(t), m.Welcome, &group.JoinOptions{KeyPackage: &k, InitPriv: kp.InitPrivateKey,
		EncryptionPriv: kp.EncryptionPrivateKey, SignaturePriv: b.sig})
	if err != nil {
		t.Fatal(err)
	}
	blob, err := g.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, kv := range [][2]string{{"sig", hex.EncodeToString(b.sig)}, {"group", hex.EncodeToString(gid)},
		{"handle", "5f0c1e2d3b4a59687766554433221100"}, {"blob", hex.EncodeToString(blob)}} {
		fmt.Fprintf(&buf, "%s %s\n", kv[0], kv[1])
	}
	if err := os.WriteFile(stagedV2, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStagedWelcomeV2Loads loads the recorded version-2 staged Welcome:
// it is listed with its group, read by handle (staging time and signer
// unknown), installs, and the installed group works; expiry discards such
// a Welcome, whose staging time is unknown.
func TestStagedWelcomeV2Loads(t *testing.T) {
	f, err := os.Open(filepath.FromSlash(stagedV2))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if rec[k], err = hex.DecodeString(v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	ctx := context.Background()
	e, err := mls.New(mls.Options{SignaturePrivateKey: rec["sig"], PastEpochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	handle := hex.EncodeToString(rec["handle"])
	for _, expire := range []bool{false, true} {
		tx := blobTx{blobs: &memBlobs{m: map[string][]byte{}}}
		_ = tx.blobs.Put(ctx, "mls.welcome", handle, rec["blob"])
		list, err := e.StagedWelcomes(ctx, tx, rec["group"])
		if err != nil || len(list) != 1 || list[0].Handle != handle {
			t.Fatalf("StagedWelcomes of the group: %+v %v", list, err)
		}
		st := list[0]
		if st.Group.Epoch != 1 || len(st.Group.Members) != 2 || !st.StagedAt.IsZero() || st.Signer.LeafIndex != ports.NoLeaf {
			t.Fatalf("staged view: epoch %d, %d members, staged at %v, signer %d", st.Group.Epoch, len(st.Group.Members), st.StagedAt, st.Signer.LeafIndex)
		}
		if expire {
			if n, err := e.ExpireWelcomes(ctx, tx, time.Unix(0, 1)); err != nil || n != 1 {
				t.Fatalf("expiry of a Welcome staged at an unknown time: %d %v", n, err)
			}
			continue
		}
		v, err := e.InstallWelcome(ctx, tx, handle)
		if err != nil || !v.Active || v.Epoch != 1 {
			t.Fatalf("install: %+v %v", v, err)
		}
		if _, err := e.Encrypt(ctx, tx, rec["group"], []byte("after the upgrade"), nil); err != nil {
			t.Fatal(err)
		}
		if rest, _ := e.StagedWelcomes(ctx, tx, nil); len(rest) != 0 {
			t.Fatalf("%d staged Welcomes remain after the install", len(rest))
		}
	}
}
