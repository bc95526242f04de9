package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-465: `regroupd restore` refuses a SQLite path that does not exist
// (it would create an empty database and "restore" it) and a gap that is
// not a positive integer; on a real file it moves the counter by the gap
// and logs what it did.
func TestCOMP465_RestoreCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := restoreCommand([]string{"-database", filepath.Join(dir, "missing.db")}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "missing.db") {
		t.Fatalf("restore of a missing file = %d, %q; want 1 naming the file", code, errOut.String())
	}
	for _, gap := range []string{"0", "-5", "many"} {
		errOut.Reset()
		if code := restoreCommand([]string{"-sequence-gap", gap}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-sequence-gap") {
			t.Fatalf("-sequence-gap %s = %d, %q; want 2 naming the flag", gap, code, errOut.String())
		}
	}
	path := filepath.Join(dir, "regroupd.db")
	ctx := context.Background()
	st, err := deliverydb.OpenSQLite(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	topic := append([]byte{byte(ports.TopicGroupMessages)}, make([]byte, 32)...)
	if _, err := st.Append(ctx, []ports.NewStoredEnvelope{{Topic: topic, Envelope: []byte{1}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	errOut.Reset()
	if code := restoreCommand([]string{"-database", path, "-sequence-gap", "100"}, &out, &errOut); code != 0 {
		t.Fatalf("restore = %d: %s", code, errOut.String())
	}
	var line struct {
		Msg    string `json:"msg"`
		Before uint64 `json:"highest_id_before"`
		Next   uint64 `json:"next_id"`
	}
	if err := json.Unmarshal(errOut.Bytes(), &line); err != nil || line.Msg != "restore done" || line.Before != 1 || line.Next != 102 {
		t.Fatalf("log %q (%v); want restore done, highest 1, next 102", errOut.String(), err)
	}
	if st, err = deliverydb.OpenSQLite(ctx, path, nil); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ids, err := st.Append(ctx, []ports.NewStoredEnvelope{{Topic: topic, Envelope: []byte{2}}}); err != nil || ids[0] != 102 {
		t.Fatalf("first append after the restore = %v, %v; want 102", ids, err)
	}
}
