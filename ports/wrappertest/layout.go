package wrappertest

import (
	"errors"
	"strconv"
)

// parseHPKECiphertext is an independent reader of the port's sealed[0]
// layout: two RFC 9420 opaque<V> fields and nothing after them.
func parseHPKECiphertext(b []byte) (enc, ct []byte, err error) {
	enc, rest, err := readOpaque(b)
	if err != nil {
		return nil, nil, err
	}
	ct, rest, err = readOpaque(rest)
	if err != nil {
		return nil, nil, err
	}
	if len(rest) != 0 {
		return nil, nil, errors.New("trailing bytes")
	}
	return enc, ct, nil
}

func readOpaque(b []byte) (v, rest []byte, err error) {
	if len(b) == 0 {
		return nil, nil, errors.New("missing length")
	}
	size := 1 << (b[0] >> 6)
	if size > 4 || len(b) < size {
		return nil, nil, errors.New("bad length prefix")
	}
	n := int(b[0] & 0x3f)
	for _, c := range b[1:size] {
		n = n<<8 | int(c)
	}
	if minimal := len(appendOpaque(nil, make([]byte, n))) - n; minimal != size {
		return nil, nil, errors.New("length prefix longer than needed")
	}
	if len(b)-size < n {
		return nil, nil, errors.New("length past end")
	}
	return b[size : size+n], b[size+n:], nil
}

// cuts returns the lengths a ciphertext of n bytes is truncated to.
func cuts(n int) []int {
	return dedupe([]int{0, 1, 2, 3, 5, n / 2, n - 17, n - 16, n - 1}, n)
}

// positions returns the byte offsets at which bits are flipped.
func positions(n int) []int {
	return dedupe([]int{0, 1, 2, 3, 4, n / 3, n / 2, n - 17, n - 16, n - 2, n - 1}, n)
}

func dedupe(in []int, n int) []int {
	seen := map[int]bool{}
	var out []int
	for _, v := range in {
		if v >= 0 && v < n && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
