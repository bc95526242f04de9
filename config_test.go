package regroup_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/internal/testenv"
)

// NetworkedConfig.Servers lists replicas: a client whose first replica
// cannot be reached works through the next one (a real regroupd); Server
// and Servers together are refused.
func TestNetworkedConfigServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs regroupd")
	}
	d := testenv.StartRegroupd(t, "sqlite")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, cleanup, err := regroup.NewNetworked(ctx, regroup.NetworkedConfig{Servers: []string{"127.0.0.1:1", d.Addr},
		SQLitePath: filepath.Join(dir, "a.db")})
	if err != nil {
		t.Fatalf("NewNetworked over two replicas, one down: %v", err)
	}
	if err := c.SyncAll(ctx); err != nil {
		t.Fatalf("sync: %v", err)
	}
	cleanup()
	_, _, err = regroup.NewNetworked(ctx, regroup.NetworkedConfig{Server: d.Addr, Servers: []string{d.Addr}, SQLitePath: filepath.Join(dir, "b.db")})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("Server and Servers: %v", err)
	}
}
