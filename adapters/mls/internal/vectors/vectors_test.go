package vectors

import (
	"testing"
)

// fakeTB records Skip and Fatal instead of stopping the goroutine.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()                  {}
func (f *fakeTB) Skip(...any)              { f.skipped = true }
func (f *fakeTB) Fatal(...any)             { f.failed = true }
func (f *fakeTB) Fatalf(string, ...any)    { f.failed = true }
func (f *fakeTB) Skipf(string, ...any)     { f.skipped = true }
func (f *fakeTB) Errorf(string, ...any)    { f.failed = true }
func (f *fakeTB) Logf(string, ...any)      {}
func (f *fakeTB) Log(...any)               {}
func (f *fakeTB) Name() string             { return "fake" }
func (f *fakeTB) Cleanup(func())           {}
func (f *fakeTB) Setenv(key, value string) {}
func (f *fakeTB) TempDir() string          { return "" }

// TestMissingVectorsSkipOrFail: absent vectors skip a test, except under
// CI=true, where they fail it.
func TestMissingVectorsSkipOrFail(t *testing.T) {
	t.Setenv("MLS_TEST_VECTORS", t.TempDir())
	t.Setenv("CI", "")
	f := &fakeTB{}
	var v any
	Load(f, "tree-math.json", &v)
	if !f.skipped || f.failed {
		t.Fatalf("without CI: skipped=%v failed=%v", f.skipped, f.failed)
	}
	t.Setenv("CI", "true")
	f = &fakeTB{}
	Load(f, "tree-math.json", &v)
	if !f.failed {
		t.Fatal("with CI=true a missing vector file must fail the test")
	}
}
