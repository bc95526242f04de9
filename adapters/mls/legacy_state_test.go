package mls_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/ports"
)

// groupV2 holds the stores of four installations written by the engine
// whose group state was one version-2 blob per group: a creator with a
// pending commit, a member with that commit staged and a late message to
// read, a member with a staged Welcome only, and a removed member.
const groupV2 = "testdata/group-state-v2.txt"

// legacyRecord is the content of groupV2: each installation's signature
// key and blobs, and the messages and figures the test replays.
type legacyRecord struct {
	sigs  map[string][]byte
	blobs map[string]map[string][]byte // installation -> "namespace/key" -> value
	vals  map[string][]byte
}

// TestRecordGroupStateV2 writes groupV2 with the engine of its time; it
// runs only when REGROUP_RECORD_STATE is set.
//
// a creates the group and adds b, c and d (b and d install the Welcome, c
// only stages it); a commits with a path (epoch 2) removing d, then sends
// "late at epoch 2" and commits again (epoch 3); b and d merge what
// concerns them. a then builds a commit to epoch 4 and leaves it pending,
// and b processes it without merging.
func TestRecordGroupStateV2(t *testing.T) {
	if os.Getenv("REGROUP_RECORD_STATE") == "" {
		t.Skip("set REGROUP_RECORD_STATE=1 to record " + groupV2)
	}
	ctx := context.Background()
	gid := []byte("group-state-v2")
	names := []string{"a", "b", "c", "d"}
	in := map[string]*installation{}
	for _, n := range names {
		in[n] = newInstallation(t, "inbox-"+n)
	}
	a, b, c, d := in["a"], in["b"], in["c"], in["d"]
	vals := map[string][]byte{}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackage(t), nil)
	must(err)
	kps := map[string]ports.KeyPackageBundle{"b": b.keyPackage(t), "c": c.keyPackage(t), "d": d.keyPackage(t)}
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kps["b"].KeyPackage, kps["c"].KeyPackage, kps["d"].KeyPackage}})
	must(err)
	_, err = a.engine.MergePending(ctx, a.tx, gid)
	must(err)
	var dLeaf uint32
	for _, n := range []string{"b", "c", "d"} {
		st, err := in[n].engine.StageWelcome(ctx, in[n].tx, out.Welcome, record(kps[n]))
		must(err)
		if n == "c" {
			continue
		}
		v, err := in[n].engine.InstallWelcome(ctx, in[n].tx, st.Handle)
		must(err)
		if n == "d" {
			dLeaf = v.OwnLeaf
		}
	}
	apply := func(commit []byte, who ...*installation) {
		t.Helper()
		for _, m := range who {
			_, err := m.engine.Process(ctx, m.tx, gid, commit)
			must(err)
			_, err = m.engine.MergeStaged(ctx, m.tx, gid)
			must(err)
		}
	}
	out, err = a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Remove: []uint32{dLeaf}, ForcePath: true})
	must(err)
	_, err = a.engine.MergePending(ctx, a.tx, gid)
	must(err)
	apply(out.Commit, b, d)
	vals["commit-2"] = out.Commit
	vals["late-2"], err = a.engine.Encrypt(ctx, a.tx, gid, []byte("late at epoch 2"), nil)
	must(err)
	out, err = a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true})
	must(err)
	_, err = a.engine.MergePending(ctx, a.tx, gid)
	must(err)
	apply(out.Commit, b)
	vals["commit-3"] = out.Commit
	out, err = a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true})
	must(err)
	vals["commit-4"], vals["authenticator-4"], vals["tree-hash-4"] = out.Commit, out.Staged.EpochAuthenticator, out.Staged.TreeHash
	p, err := b.engine.Process(ctx, b.tx, gid, out.Commit)
	must(err)
	if p.Staged == nil || p.Staged.Epoch != 4 {
		t.Fatalf("b staged %+v", p.Staged)
	}
	vals["group"], vals["d-leaf"] = gid, []byte{byte(dLeaf)}

	var buf bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&buf, "sig %s %x\n", n, in[n].sig)
		keys := make([]string, 0, len(in[n].tx.blobs.m))
		for k := range in[n].tx.blobs.m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&buf, "blob %s %s %x\n", n, k, in[n].tx.blobs.m[k])
		}
	}
	vkeys := make([]string, 0, len(vals))
	for k := range vals {
		vkeys = append(vkeys, k)
	}
	slices.Sort(vkeys)
	for _, k := range vkeys {
		fmt.Fprintf(&buf, "val %s %x\n", k, vals[k])
	}
	must(os.WriteFile(groupV2, buf.Bytes(), 0o644))
}

// readLegacy reads groupV2.
func readLegacy(t *testing.T) legacyRecord {
	t.Helper()
	f, err := os.Open(filepath.FromSlash(groupV2))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := legacyRecord{sigs: map[string][]byte{}, blobs: map[string]map[string][]byte{}, vals: map[string][]byte{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		v, err := hex.DecodeString(fields[len(fields)-1])
		if err != nil {
			t.Fatalf("%s: %v", groupV2, err)
		}
		switch fields[0] {
		case "sig":
			rec.sigs[fields[1]] = v
		case "blob":
			if rec.blobs[fields[1]] == nil {
				rec.blobs[fields[1]] = map[string][]byte{}
			}
			rec.blobs[fields[1]][fields[2]] = v
		case "val":
			rec.vals[fields[1]] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rec
}

// legacyInstallation is an engine of today over the recorded blobs of
// installation n.
func legacyInstallation(t *testing.T, rec legacyRecord, n string) *installation {
	t.Helper()
	e, err := mls.New(mls.Options{SignaturePrivateKey: rec.sigs[n], PastEpochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for k, v := range rec.blobs[n] {
		m[k] = slices.Clone(v)
	}
	return &installation{engine: e, tx: blobTx{blobs: &memBlobs{m: m}}, sig: rec.sigs[n], inbox: "inbox-" + n}
}

// TestGroupStateV2Loads opens the stores recorded in groupV2 with today's
// engine: every group state, pending and staged commit, staged Welcome
// and removal record of the version-2 engine loads and keeps working, and
// the state written back from then on loads again in a fresh engine.
func TestGroupStateV2Loads(t *testing.T) {
	ctx := context.Background()
	rec := readLegacy(t)
	gid := rec.vals["group"]
	a, b, c, d := legacyInstallation(t, rec, "a"), legacyInstallation(t, rec, "b"), legacyInstallation(t, rec, "c"), legacyInstallation(t, rec, "d")
	must := func(step string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	for n, m := range map[string]*installation{"a": a, "b": b} {
		v, err := m.engine.Group(ctx, m.tx, gid)
		if err != nil || v.Epoch != 3 || !v.Active || len(v.Members) != 3 {
			t.Fatalf("%s: recorded group: epoch %d, active %v, %d members, %v", n, v.Epoch, v.Active, len(v.Members), err)
		}
	}
	// d was removed at epoch 2: inactive, with its removal record.
	vd, err := d.engine.Group(ctx, d.tx, gid)
	if err != nil || vd.Active || vd.Removal == nil || vd.Removal.Epoch != 2 || vd.Removal.Leaf != uint32(rec.vals["d-leaf"][0]) {
		t.Fatalf("d: removed group: %+v %v", vd.Removal, err)
	}
	// b reads a's late message of epoch 2 with the past-epoch keys of its
	// version-2 state, then merges the commit it had staged.
	p, err := b.engine.Process(ctx, b.tx, gid, rec.vals["late-2"])
	if err != nil || string(p.Application) != "late at epoch 2" || p.Epoch != 2 {
		t.Fatalf("b: late message: %+v %v", p, err)
	}
	// The late message dropped the staged commit (COMP-114): process it again.
	_, err = b.engine.Process(ctx, b.tx, gid, rec.vals["commit-4"])
	must("b: process commit 4", err)
	vb, err := b.engine.MergeStaged(ctx, b.tx, gid)
	must("b: merge commit 4", err)
	va, err := a.engine.MergePending(ctx, a.tx, gid)
	must("a: merge its pending commit", err)
	for n, v := range map[string]ports.GroupView{"a": va, "b": vb} {
		if v.Epoch != 4 || !bytes.Equal(v.EpochAuthenticator, rec.vals["authenticator-4"]) || !bytes.Equal(v.TreeHash, rec.vals["tree-hash-4"]) {
			t.Fatalf("%s at epoch 4 differs from the recorded commit's epoch", n)
		}
	}
	// c installs the Welcome it staged under the version-2 engine and
	// catches up with the recorded commits.
	list, err := c.engine.StagedWelcomes(ctx, c.tx, gid)
	if err != nil || len(list) != 1 || list[0].Group.Epoch != 1 {
		t.Fatalf("c: staged Welcomes: %+v %v", list, err)
	}
	_, err = c.engine.InstallWelcome(ctx, c.tx, list[0].Handle)
	must("c: install", err)
	for _, k := range []string{"commit-2", "commit-3", "commit-4"} {
		_, err := c.engine.Process(ctx, c.tx, gid, rec.vals[k])
		must("c: process "+k, err)
		_, err = c.engine.MergeStaged(ctx, c.tx, gid)
		must("c: merge "+k, err)
	}
	// The three go on together, with state written by today's engine.
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true})
	must("a: commit", err)
	va, err = a.engine.MergePending(ctx, a.tx, gid)
	must("a: merge", err)
	for n, m := range map[string]*installation{"b": b, "c": c} {
		_, err := m.engine.Process(ctx, m.tx, gid, out.Commit)
		must(n+": process", err)
		v, err := m.engine.MergeStaged(ctx, m.tx, gid)
		must(n+": merge", err)
		same(t, n+" after the first commit of today's engine", va, v)
	}
	ct, err := a.engine.Encrypt(ctx, a.tx, gid, []byte("after the upgrade"), nil)
	must("a: encrypt", err)
	for n, m := range map[string]*installation{"b": b, "c": c} {
		// A fresh engine over the same blobs reads what today's engine wrote.
		fresh := legacyInstallation(t, rec, n)
		fresh.tx = m.tx
		p, err := fresh.engine.Process(ctx, fresh.tx, gid, ct)
		if err != nil || string(p.Application) != "after the upgrade" {
			t.Fatalf("%s: message after the upgrade: %+v %v", n, p, err)
		}
	}
}
