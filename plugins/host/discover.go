package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/go-plugin"

	"github.com/regroup-mls/regroup/ports"
)

// BinaryPrefix is the file name prefix of a plugin executable.
const BinaryPrefix = "regroup-plugin-"

type binary struct {
	name, path string
}

// discover lists the plugin executables in dir in name order.
func discover(dir string) ([]binary, error) {
	if dir == "" {
		return nil, fmt.Errorf("discover plugins: %w: no directory configured", ports.ErrInvalidInput)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("discover plugins in %s: %w", dir, err)
	}
	var out []binary
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), BinaryPrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		st, err := os.Stat(path) // follows symbolic links
		if err != nil {
			return nil, fmt.Errorf("discover plugins: %w", err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			continue
		}
		out = append(out, binary{name: e.Name(), path: path})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// secureConfig returns go-plugin's checksum check for bin under o, or nil
// when the binary is not pinned and pinning is optional.
func secureConfig(bin binary, o Options) (*plugin.SecureConfig, error) {
	sum, pinned := o.Checksums[bin.name]
	if !pinned {
		if o.RequireChecksums {
			return nil, fmt.Errorf("load plugin %s: %w: no checksum pinned and checksums are required", bin.name, ports.ErrInvalidInput)
		}
		return nil, nil
	}
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != sha256.Size {
		return nil, fmt.Errorf("load plugin %s: %w: pinned checksum is not a hex SHA-256", bin.name, ports.ErrInvalidInput)
	}
	return &plugin.SecureConfig{Checksum: raw, Hash: sha256.New()}, nil
}

// Checksum returns the lower-case hex SHA-256 of the file at path, the form
// [Options.Checksums] takes.
func Checksum(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("checksum plugin: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
