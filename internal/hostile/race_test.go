//go:build race

package hostile_test

// raceBuild is set under the race detector, which makes every scenario
// several times slower: the ordinary test run then covers each fault with
// one scenario and a few mixes, and make hostile runs the whole matrix.
const raceBuild = true
