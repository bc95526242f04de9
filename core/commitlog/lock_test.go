package commitlog

import (
	"fmt"
	"sync"
	"testing"
)

// The per-conversation lock map holds only conversations with a pass
// running or waiting: after many passes over many conversations it is
// empty, and passes of one conversation still exclude each other.
func TestLockMapIsPruned(t *testing.T) {
	l := &Log{locks: map[string]*convLock{}}
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := []byte(fmt.Sprint(i % 8))
			for j := 0; j < 50; j++ {
				unlock := l.lock(id)
				mu.Lock()
				inside[string(id)]++
				if inside[string(id)] != 1 {
					t.Errorf("two passes of conversation %s at once", id)
				}
				mu.Unlock()
				mu.Lock()
				inside[string(id)]--
				mu.Unlock()
				unlock()
			}
		}(i)
	}
	wg.Wait()
	for i := 0; i < 1000; i++ {
		l.lock([]byte(fmt.Sprint("conversation", i)))()
	}
	if n := len(l.locks); n != 0 {
		t.Fatalf("%d idle conversations still in the lock map", n)
	}
}
