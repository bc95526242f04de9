package host

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// TestHostileRepliesAndArguments: keys and nonces are checked against the
// declared sizes before a call (the caller's fault), and every reply is
// checked after it (the plugin's fault, ErrAlgorithmUnavailable). The liar
// accepts any key and answers every call with the wrong sizes.
func TestHostileRepliesAndArguments(t *testing.T) {
	_, w, a, _ := loadHostile(t, "liar", nil)
	ctx := longCtx(t)
	info := ports.WelcomeWrapperInfo()
	key, nonce := make([]byte, 32), make([]byte, 12)

	_, _, err := w.GenerateKey(ctx)
	pluginFault(t, "1,000-byte public key for a declared 32", err)
	if err := w.CheckPublicKey(ctx, []byte{1, 2, 3}); !errors.Is(err, ports.ErrInvalidKey) {
		t.Errorf("3-byte public key checked as %v, want ErrInvalidKey", err)
	}
	if _, err := w.Seal(ctx, []byte{1, 2, 3}, info, []byte("welcome")); !errors.Is(err, ports.ErrInvalidKey) {
		t.Errorf("seal to a 3-byte public key: %v, want ErrInvalidKey", err)
	}
	if _, err := w.Seal(ctx, make([]byte, 32), info); !errors.Is(err, ports.ErrInvalidInput) {
		t.Errorf("seal of no plaintext: %v, want ErrInvalidInput", err)
	}
	_, err = w.Seal(ctx, make([]byte, 32), info, []byte("welcome"), []byte("meta"))
	pluginFault(t, "1-byte sealed payloads", err)
	_, err = w.Open(ctx, make([]byte, 32), info, make([]byte, 40), make([]byte, 20))
	pluginFault(t, "plaintexts longer than their sealed payloads", err)
	if _, err := w.Open(ctx, nil, info, make([]byte, 40)); !errors.Is(err, ports.ErrInvalidKey) {
		t.Errorf("open with an empty private key: %v, want ErrInvalidKey", err)
	}

	_, err = a.Seal(ctx, key, nonce, make([]byte, 16), nil)
	pluginFault(t, "1-byte ciphertext for 16 bytes of plaintext", err)
	if _, err := a.Open(ctx, []byte{1}, []byte{1}, []byte{1}, nil); !errors.Is(err, ports.ErrInvalidKey) {
		t.Errorf("open under a 1-byte key: %v, want ErrInvalidKey", err)
	}
	if _, err := a.Open(ctx, key, []byte{1}, []byte{1}, nil); !errors.Is(err, ports.ErrInvalidInput) {
		t.Errorf("open under a 1-byte nonce: %v, want ErrInvalidInput", err)
	}
	if _, err := a.Seal(ctx, key[:31], nonce, nil, nil); !errors.Is(err, ports.ErrInvalidKey) {
		t.Errorf("seal under a 31-byte key: %v, want ErrInvalidKey", err)
	}
	_, err = a.Open(ctx, key, nonce, []byte{1}, nil)
	pluginFault(t, "5 bytes of plaintext from a 1-byte ciphertext", err)
}

// TestHostileDescriptions: Load refuses a plugin whose description names
// unusable identifiers, sizes of 0 or beyond the caps, one identifier twice,
// or more algorithms than a plugin may serve, and stops its process.
func TestHostileDescriptions(t *testing.T) {
	cases := []struct{ mode, why string }{
		{"desc-pub-0", "public key size 0"},
		{"desc-pub-2p31", "public key size 2^31"},
		{"desc-pub-max", "public key size 2^32-1"},
		{"desc-key-0", "aead key size 0"},
		{"desc-key-2p31", "aead key size 2^31"},
		{"desc-nonce-0", "nonce size 0"},
		{"desc-nonce-max", "nonce size 2^32-1"},
		{"desc-wid-0", "wrapper id 0 (unspecified)"},
		{"desc-wid-neg", "wrapper id -5"},
		{"desc-wid-3", "wrapper id 3 (SYMMETRIC_KEY marks a pointee)"},
		{"desc-aid-0", "aead id 0 (unspecified)"},
		{"desc-aid-neg", "aead id -5"},
		{"desc-wid-twice", "one wrapper id twice"},
		{"desc-aid-twice", "one aead id twice"},
		{"desc-just-over", "65 algorithms, one more than a plugin may serve"},
		{"desc-many", "100,000 algorithms"},
		{"desc-nil-entry", "an empty wrapper entry (id 0, size 0)"},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			dir, state := hostileDir(t, c.mode)
			h, err := Load(longCtx(t), quietOptions(dir))
			if err == nil {
				h.Close()
				t.Fatalf("%s: Load accepted it", c.why)
			}
			if !errors.Is(err, ErrInvalidDescription) {
				t.Errorf("%s: %v, want ErrInvalidDescription", c.why, err)
			}
			if !strings.Contains(err.Error(), BinaryPrefix+c.mode) {
				t.Errorf("%s: error does not name the plugin: %v", c.why, err)
			}
			for _, pid := range pids(t, state, c.mode, "start") {
				waitFor(t, "refused plugin stopped", 30*time.Second, func() bool { return !alive(pid) })
			}
		})
	}
}

// TestHostileFloodIsBounded: a reply of 3 million empty payloads to a seal
// of one is refused before it is decoded; the host allocates a bounded
// amount, not a multiple of the wire size.
func TestHostileFloodIsBounded(t *testing.T) {
	_, w, _, _ := loadHostile(t, "flood", nil)
	ctx := longCtx(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := w.Seal(ctx, make([]byte, 32), ports.WelcomeWrapperInfo(), []byte("welcome"))
	runtime.ReadMemStats(&after)
	pluginFault(t, "3 million payloads for one", err)
	// An independent bound: the reply on the wire is about 6 MB; the old
	// host decoded it into about 190 MB.
	got := after.TotalAlloc - before.TotalAlloc
	if got > 16<<20 {
		t.Errorf("the host allocated %d MB for a refused reply", got>>20)
	}
	t.Logf("the host allocated %d KiB for the call", got>>10)
}

// TestJOIN085OversizedOrExhaustedReplyIsAPluginFault (JOIN-085, JOIN-087):
// a reply larger than the call allows, or a ResourceExhausted status the
// plugin sends, is the plugin's fault (ErrAlgorithmUnavailable: the Welcome
// is retried), never ErrInvalidInput (which would reject it for good). A
// request too large to send is the caller's: ErrInvalidInput, and nothing
// reaches the plugin.
func TestJOIN085OversizedOrExhaustedReplyIsAPluginFault(t *testing.T) {
	_, w, _, _ := loadHostile(t, "huge", nil)
	ctx := longCtx(t)
	_, err := w.Seal(ctx, make([]byte, 32), ports.WelcomeWrapperInfo(), []byte("welcome"))
	pluginFault(t, "65 MB sealed payload", err)

	_, w, a, _ := loadHostile(t, "exhausted", nil)
	_, err = w.Seal(ctx, make([]byte, 32), ports.WelcomeWrapperInfo(), []byte("welcome"))
	pluginFault(t, "ResourceExhausted from the plugin (seal)", err)
	_, err = a.Open(ctx, make([]byte, 32), make([]byte, 12), make([]byte, 32), nil)
	pluginFault(t, "ResourceExhausted from the plugin (aead open)", err)

	big := make([]byte, 65<<20)
	if _, err := w.Seal(ctx, make([]byte, 32), ports.WelcomeWrapperInfo(), big); !errors.Is(err, ports.ErrInvalidInput) {
		t.Errorf("65 MB plaintext: %v, want ErrInvalidInput", err)
	}
}

// TestHostileErrorTextIsSanitized: the plugin's error text is truncated,
// escaped and labelled as the plugin's; its class is kept. Text too large
// for the call's trailer limit is refused as a plugin fault.
func TestHostileErrorTextIsSanitized(t *testing.T) {
	_, w, _, _ := loadHostile(t, "chatty", nil)
	ctx := longCtx(t)
	_, err := w.Open(ctx, make([]byte, 32), ports.WelcomeWrapperInfo(), make([]byte, 40))
	if !errors.Is(err, ports.ErrCorrupt) {
		t.Errorf("class lost: %v", err)
	}
	msg := err.Error()
	if len(msg) > 2*MaxErrorText {
		t.Errorf("error text is %d bytes", len(msg))
	}
	if strings.ContainsAny(msg, "\n\r\x1b") {
		t.Errorf("raw control characters in %q", msg)
	}
	if !strings.Contains(msg, "via plugin "+BinaryPrefix+`chatty: plugin says "line one\nline two \x1b[31mred`) {
		t.Errorf("text not labelled or not escaped: %q", msg)
	}

	_, w, _, _ = loadHostile(t, "verbose", nil)
	_, err = w.Open(ctx, make([]byte, 32), ports.WelcomeWrapperInfo(), make([]byte, 40))
	pluginFault(t, "1 MB error text", err)
	if len(err.Error()) > 2*MaxErrorText {
		t.Errorf("error text is %d bytes", len(err.Error()))
	}
}

// TestAbandonedLoadStopsTheChild: a Load whose ctx ends while a plugin has
// not finished its handshake stops that process before it returns, well
// before StartTimeout.
func TestAbandonedLoadStopsTheChild(t *testing.T) {
	dir, state := hostileDir(t, "hang-start")
	o := quietOptions(dir)
	o.StartTimeout = 10 * time.Minute
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		h, err := Load(ctx, o)
		if h != nil {
			h.Close()
		}
		done <- err
	}()
	pid := waitPids(t, state, "hang-start", "hang", 1)[0]
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("abandoned Load: %v, want context.Canceled", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Load did not return after its ctx was canceled")
	}
	if alive(pid) {
		t.Errorf("plugin process %d still runs after Load returned", pid)
	}
}

// TestCloseStopsAHangingRestart: Close does not wait for a restart that
// hangs before its handshake; it stops that process, and the call waiting
// for it fails with ErrAlgorithmUnavailable.
func TestCloseStopsAHangingRestart(t *testing.T) {
	h, w, _, state := loadHostile(t, "hang-restart", func(o *Options) { o.StartTimeout = 10 * time.Minute })
	ctx := longCtx(t)
	pub := make([]byte, 32)
	_, err := w.Seal(ctx, pub, ports.WelcomeWrapperInfo(), []byte("crash"))
	pluginFault(t, "crash", err)
	call := make(chan error, 1)
	go func() {
		_, err := w.Seal(ctx, pub, ports.WelcomeWrapperInfo(), []byte("welcome"))
		call <- err
	}()
	pid := waitPids(t, state, "hang-restart", "hang", 1)[0]
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(60 * time.Second):
		t.Fatal("Close waited for a hanging restart")
	}
	if alive(pid) {
		t.Errorf("restarting process %d still runs after Close", pid)
	}
	select {
	case err := <-call:
		pluginFault(t, "call waiting for the restart", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the call waiting for the restart did not return")
	}
}

// TestBadEntryIsSkipped: a dangling regroup-plugin-* link, a link loop and
// an entry that is not a regular executable cost that entry only: Load
// loads the other plugins and reports what it skipped.
func TestBadEntryIsSkipped(t *testing.T) {
	dir := exampleDir(t)
	for name, target := range map[string]string{
		BinaryPrefix + "dangling": filepath.Join(dir, "nowhere"),
		BinaryPrefix + "loop":     BinaryPrefix + "loop",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	h := load(t, quietOptions(dir))
	if ps := h.Plugins(); len(ps) != 1 || ps[0].Name != BinaryPrefix+"xwing" {
		t.Fatalf("loaded %+v", ps)
	}
	skipped := map[string]error{}
	for _, s := range h.Skipped() {
		skipped[s.Name] = s.Err
	}
	for _, name := range []string{BinaryPrefix + "dangling", BinaryPrefix + "loop"} {
		if skipped[name] == nil {
			t.Errorf("%s not reported as skipped (skipped: %v)", name, skipped)
		}
	}
	if len(skipped) != 2 {
		t.Errorf("skipped %v", skipped)
	}
}

// TestCanceledHungCallRestarts: a call its caller cancels while the plugin
// is stuck in it retires that process: it is stopped once no call uses it,
// and the next call runs on a fresh one.
func TestCanceledHungCallRestarts(t *testing.T) {
	_, w, _, state := loadHostile(t, "hang", nil)
	pub := make([]byte, 32)
	first := waitPids(t, state, "hang", "start", 1)[0]
	ctx, cancel := context.WithCancel(t.Context())
	call := make(chan error, 1)
	go func() {
		_, err := w.Seal(ctx, pub, ports.WelcomeWrapperInfo(), []byte("hang"))
		call <- err
	}()
	waitPids(t, state, "hang", "hang", 1)
	cancel()
	err := <-call
	if !errors.Is(err, ports.ErrAlgorithmUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled call: %v", err)
	}
	waitFor(t, "stuck process stopped", 30*time.Second, func() bool { return !alive(first) })
	if _, err := w.Seal(longCtx(t), pub, ports.WelcomeWrapperInfo(), []byte("welcome")); err != nil {
		t.Fatalf("call after the restart: %v", err)
	}
	if n := len(pids(t, state, "hang", "start")); n != 2 {
		t.Fatalf("%d processes started, want 2", n)
	}
}

// TestPinnedBinaryRunsWhatWasVerified: a pinned binary replaced after its
// checksum was verified is not what runs: the host runs the bytes it
// verified, at load and at every restart.
func TestPinnedBinaryRunsWhatWasVerified(t *testing.T) {
	dir := t.TempDir()
	name := BinaryPrefix + "xwing"
	path := filepath.Join(dir, name)
	copyFile(t, examplePlugin(t), path)
	sum, err := Checksum(path)
	if err != nil {
		t.Fatal(err)
	}
	impostor := filepath.Join(t.TempDir(), name)
	copyFile(t, hostileBinary(t), impostor)
	saved := testHookVerified
	t.Cleanup(func() { testHookVerified = saved })
	testHookVerified = func(string) {
		// What an attacker with write access to the plugin directory
		// does between the check and the launch.
		if err := os.Rename(impostor, path); err != nil {
			t.Error(err)
		}
	}
	o := quietOptions(dir)
	o.Checksums, o.RequireChecksums = map[string]string{name: sum}, true
	h := load(t, o)
	if _, err := os.Stat(impostor); err == nil {
		t.Fatal("the hook did not run")
	}
	ws := h.Plugins()[0].Wrappers
	if len(ws) != 2 || ws[0] != ports.WrapperXWingMLKEM768Draft6 {
		t.Fatalf("the host ran the replaced binary: it serves %v", ws)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, in); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
}
