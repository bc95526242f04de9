package host

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/regroup-mls/regroup/ports"
)

// syncBuffer is an io.Writer hclog may call from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A host that closes after normal use stops its plugin process
// gracefully: the process exits by itself (go-plugin logs "plugin process
// exited" without an error) and nothing is logged at error level.
func TestCloseStopsPluginsGracefully(t *testing.T) {
	var logs syncBuffer
	o := &Options{Dir: selfPluginDir(t), Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})}
	h := load(t, o)
	w := mustWrapper(t, h, faultyID)
	pub, _, err := w.GenerateKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sealOK(t, w, pub)
	start := time.Now()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Contains(out, "[ERROR]") || strings.Contains(out, "signal: killed") {
		t.Errorf("a clean close logged an error:\n%s", out)
	}
	if !strings.Contains(out, "plugin process exited") {
		t.Errorf("the plugin process did not exit by itself:\n%s", out)
	}
	t.Logf("close took %v", time.Since(start))
	if _, err := w.Seal(t.Context(), pub, nil, []byte("x")); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Seal after Close: %v, want %v", err, ports.ErrAlgorithmUnavailable)
	}
}
