// Package vectors locates and loads the IETF MLS test vectors for tests of
// the adapters/mls packages.
//
// # Locating the vectors
//
// The directory is taken from the environment variable MLS_TEST_VECTORS, or
// else is ../shared/testdata/mls-vectors relative to the repository root
// (the directory holding go.mod, found by walking up from the working
// directory). The vectors are not part of the repository: get them from
// https://github.com/mlswg/mls-implementations (test-vectors/*.json).
//
// # Missing vectors
//
// When the files are absent, [Load] skips the test with a message saying how
// to get them, except when the environment variable CI is "true": then it
// fails the test, so CI can never pass without running them.
package vectors

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Hex is a byte string written in JSON as a hex string; JSON null decodes
// to nil.
type Hex []byte

// UnmarshalJSON decodes a hex string or null.
func (h *Hex) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*h = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("hex field: %w", err)
	}
	v, err := hex.DecodeString(s)
	if err != nil {
		return fmt.Errorf("hex field: %w", err)
	}
	*h = v
	return nil
}

// Dir returns the vectors directory, or an error saying where it looked.
func Dir() (string, error) {
	if d := os.Getenv("MLS_TEST_VECTORS"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "..", "shared", "testdata", "mls-vectors"), nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod above " + wd)
		}
	}
}

// Load decodes the JSON vector file name (such as "tree-math.json") into v.
// When the file is missing it skips t, or fails t when CI=true.
func Load(t testing.TB, name string, v any) {
	t.Helper()
	dir, err := Dir()
	var data []byte
	if err == nil {
		data, err = os.ReadFile(filepath.Join(dir, name))
	}
	if err != nil {
		msg := fmt.Sprintf("IETF MLS test vector %s not available (%v); set MLS_TEST_VECTORS to a directory "+
			"holding the files of https://github.com/mlswg/mls-implementations/tree/main/test-vectors "+
			"or place them at <repo root>/../shared/testdata/mls-vectors", name, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
			return
		}
		t.Skip(msg)
		return
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
}

// Path returns the path of the vector file name if it exists, for seeding
// fuzz corpora; ok is false when it does not.
func Path(name string) (string, bool) {
	dir, err := Dir()
	if err != nil {
		return "", false
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", false
	}
	return p, true
}
