package host

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// pair measures one operation in-process and through the plugin in the same
// loop, and reports both figures and their ratio (plugin / in-process).
func pair(b *testing.B, inproc, plugin func() error) {
	b.Helper()
	var tIn, tPlugin time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := inproc(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := plugin(); err != nil {
			b.Fatal(err)
		}
		tIn += t1.Sub(t0)
		tPlugin += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tIn.Nanoseconds())/n, "inproc-ns/op")
	b.ReportMetric(float64(tPlugin.Nanoseconds())/n, "plugin-ns/op")
	b.ReportMetric(float64(tPlugin)/float64(tIn), "plugin/inproc")
}

// BenchmarkWrapper seals and opens a 4 KiB Welcome and its metadata with
// every built-in wrapper, in-process and through a plugin subprocess.
// ns/op is the sum of both; inproc-ns/op and plugin-ns/op split it.
func BenchmarkWrapper(b *testing.B) {
	h := load(b, quietOptions(selfPluginDir(b)))
	ctx := context.Background()
	info := ports.WelcomeWrapperInfo()
	welcome, meta := bytes.Repeat([]byte{7}, 4096), bytes.Repeat([]byte{9}, 64)
	for _, id := range builtinWrappers {
		remote := mustWrapper(b, h, id)
		local := wrapperCaps(b, id).Reference
		pub, priv, err := local.GenerateKey(ctx)
		if err != nil {
			b.Fatal(err)
		}
		sealed, err := local.Seal(ctx, pub, info, welcome, meta)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(id.String()+"/seal", func(b *testing.B) {
			pair(b, func() error { _, err := local.Seal(ctx, pub, info, welcome, meta); return err },
				func() error { _, err := remote.Seal(ctx, pub, info, welcome, meta); return err })
		})
		b.Run(id.String()+"/open", func(b *testing.B) {
			pair(b, func() error { _, err := local.Open(ctx, priv, info, sealed...); return err },
				func() error { _, err := remote.Open(ctx, priv, info, sealed...); return err })
		})
	}
}

// BenchmarkPointeeAEAD seals and opens a 4 KiB pointee with
// ChaCha20-Poly1305, in-process and through a plugin subprocess.
func BenchmarkPointeeAEAD(b *testing.B) {
	h := load(b, quietOptions(selfPluginDir(b)))
	ctx := context.Background()
	remote, err := h.PointeeAEAD(ports.PointeeAEADChaCha20Poly1305)
	if err != nil {
		b.Fatal(err)
	}
	local := aeadCaps(b).Reference
	key, nonce, pt := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 12), bytes.Repeat([]byte{3}, 4096)
	ct, err := local.Seal(ctx, key, nonce, pt, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("seal", func(b *testing.B) {
		pair(b, func() error { _, err := local.Seal(ctx, key, nonce, pt, nil); return err },
			func() error { _, err := remote.Seal(ctx, key, nonce, pt, nil); return err })
	})
	b.Run("open", func(b *testing.B) {
		pair(b, func() error { _, err := local.Open(ctx, key, nonce, ct, nil); return err },
			func() error { _, err := remote.Open(ctx, key, nonce, ct, nil); return err })
	})
}
