package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/go-plugin"

	"github.com/regroup-mls/regroup/ports"
)

// BinaryPrefix is the file name prefix of a plugin executable.
const BinaryPrefix = "regroup-plugin-"

// maxBinarySize bounds a pinned binary the host reads to verify.
const maxBinarySize = 1 << 30

type binary struct {
	name, path string
}

// Skipped is a directory entry named like a plugin that [Load] did not
// launch, and why: a link that leads nowhere, a file that is not a regular
// executable, an entry that cannot be examined.
type Skipped struct {
	// Name is the entry's file name, Path its path.
	Name, Path string
	// Err says why the entry was skipped.
	Err error
}

// discover lists the plugin executables in dir in name order, and the
// entries named like plugins that cannot be launched.
func discover(dir string) ([]binary, []Skipped, error) {
	if dir == "" {
		return nil, nil, fmt.Errorf("discover plugins: %w: no directory configured", ports.ErrInvalidInput)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("discover plugins in %s: %w", dir, err)
	}
	var out []binary
	var skipped []Skipped
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), BinaryPrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		st, err := os.Stat(path) // follows symbolic links
		switch {
		case err != nil:
			skipped = append(skipped, Skipped{Name: e.Name(), Path: path, Err: err})
		case !st.Mode().IsRegular():
			skipped = append(skipped, Skipped{Name: e.Name(), Path: path, Err: fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())})
		case st.Mode().Perm()&0o111 == 0:
			skipped = append(skipped, Skipped{Name: e.Name(), Path: path, Err: fmt.Errorf("%s is not executable", path)})
		default:
			out = append(out, binary{name: e.Name(), path: path})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, skipped, nil
}

// pinned returns the SHA-256 pinned for bin under o, nil when the binary is
// not pinned and pinning is optional.
func pinned(bin binary, o Options) ([]byte, error) {
	sum, ok := o.Checksums[bin.name]
	if !ok {
		if o.RequireChecksums {
			return nil, fmt.Errorf("load plugin %s: %w: no checksum pinned and checksums are required", bin.name, ports.ErrInvalidInput)
		}
		return nil, nil
	}
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != sha256.Size {
		return nil, fmt.Errorf("load plugin %s: %w: pinned checksum is not a hex SHA-256", bin.name, ports.ErrInvalidInput)
	}
	return raw, nil
}

// testHookVerified runs after a pinned binary was verified and copied,
// before it is launched.
var testHookVerified = func(path string) {}

// verifiedCopy reads bin once, checks its SHA-256 against want and writes
// the verified bytes into runDir, a directory only this process's user can
// write, returning the copy's path. The copy is what runs, at load and at
// every restart, so replacing the binary after the check changes nothing.
func verifiedCopy(bin binary, want []byte, runDir string) (string, error) {
	f, err := os.Open(bin.path)
	if err != nil {
		return "", fmt.Errorf("load plugin %s: %w", bin.name, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBinarySize+1))
	f.Close()
	if err != nil {
		return "", fmt.Errorf("load plugin %s: %w", bin.name, err)
	}
	if len(data) > maxBinarySize {
		return "", fmt.Errorf("load plugin %s: %w: binary larger than %d bytes", bin.name, ports.ErrInvalidInput, maxBinarySize)
	}
	if got := sha256.Sum256(data); string(got[:]) != string(want) {
		return "", fmt.Errorf("load plugin %s: %w", bin.name, plugin.ErrChecksumsDoNotMatch)
	}
	path := filepath.Join(runDir, bin.name)
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o500)
	if err != nil {
		return "", fmt.Errorf("load plugin %s: copy verified binary: %w", bin.name, err)
	}
	_, werr := out.Write(data)
	cerr := out.Close()
	if err := firstErr(werr, cerr); err != nil {
		return "", fmt.Errorf("load plugin %s: copy verified binary: %w", bin.name, err)
	}
	testHookVerified(bin.path)
	return path, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Checksum returns the lower-case hex SHA-256 of the file at path, the form
// [Options.Checksums] takes.
func Checksum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("checksum plugin: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checksum plugin: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
