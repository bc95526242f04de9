// Command faulty is a regroup algorithm plugin that serves the real X-Wing
// Welcome wrapper of adapters/pqwrap and fails its Open on demand, so that
// tests can check what a join does when a plugin crashes, hangs or
// returns garbage while a Welcome is being unwrapped.
//
// What Open does is read, at every call, from the file named
// [ControlFile] beside the binary:
//
//   - absent or empty: it opens honestly;
//   - "crash": the process exits with status 3;
//   - "hang": the call never returns, whatever its context says;
//   - "garbage": it returns the honest plaintexts with every byte
//     inverted, the same garbage at every call;
//   - "random": it returns random bytes of the honest sizes, different at
//     every call.
//
// Every other method is the honest X-Wing's.
package main

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/plugins/sdk"
	"github.com/regroup-mls/regroup/ports"
)

// ControlFile is the name of the file, beside the binary, that says what
// Open does.
const ControlFile = "faulty-control"

type faulty struct {
	ports.WrapperAlgorithm
	control string
}

func (f faulty) mode() string {
	b, err := os.ReadFile(f.control)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (f faulty) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	mode := f.mode()
	switch mode {
	case "crash":
		os.Exit(3)
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	}
	pts, err := f.WrapperAlgorithm.Open(ctx, priv, info, sealed...)
	if err != nil {
		return nil, err
	}
	for _, pt := range pts {
		switch mode {
		case "garbage":
			for i := range pt {
				pt[i] = ^pt[i]
			}
		case "random":
			_, _ = rand.Read(pt)
		}
	}
	return pts, nil
}

func main() {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	sdk.Serve(faulty{WrapperAlgorithm: pqwrap.NewXWing(), control: filepath.Join(filepath.Dir(exe), ControlFile)})
}
