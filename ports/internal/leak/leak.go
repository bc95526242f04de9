// Package leak finds secrets in error texts, for the crypto contract
// suites (ports/aeadtest, ports/wrappertest): no plaintext or key material
// may leave an adapter through an error.
package leak

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// Find reports how err's text shows secret, "" when it does not: the
// bytes themselves, hex in either case, base64, or Go's %v of a byte
// slice, of any 8-byte window of secret.
func Find(err error, secret []byte) string {
	if err == nil || len(secret) < 8 {
		return ""
	}
	text := err.Error() + "\n" + fmt.Sprintf("%+v", err)
	if strings.Contains(text, base64.StdEncoding.EncodeToString(secret)) {
		return "as base64"
	}
	for i := 0; i+8 <= len(secret); i++ {
		w := secret[i : i+8]
		switch {
		case strings.Contains(text, string(w)):
			return fmt.Sprintf("bytes %d to %d verbatim", i, i+8)
		case strings.Contains(strings.ToLower(text), hex.EncodeToString(w)):
			return fmt.Sprintf("bytes %d to %d in hex", i, i+8)
		case strings.Contains(text, strings.Trim(fmt.Sprint(w), "[]")):
			return fmt.Sprintf("bytes %d to %d as decimal", i, i+8)
		}
	}
	return ""
}
