package clock

import (
	"testing"
	"time"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeNowMovesOnlyWhenAdvanced(t *testing.T) {
	f := NewFake(start)
	if !f.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", f.Now(), start)
	}
	f.Advance(24 * time.Hour)
	if want := start.Add(24 * time.Hour); !f.Now().Equal(want) {
		t.Fatalf("after Advance(1d) Now = %v, want %v", f.Now(), want)
	}
	f.Advance(-time.Hour)
	f.Set(start)
	if want := start.Add(24 * time.Hour); !f.Now().Equal(want) {
		t.Fatalf("clock ran backwards to %v", f.Now())
	}
}

func TestFakeAfterFiresWhenDue(t *testing.T) {
	f := NewFake(start)
	early := f.After(10 * time.Second)
	late := f.After(72 * time.Hour)
	if f.Waiters() != 2 {
		t.Fatalf("Waiters = %d, want 2", f.Waiters())
	}
	f.Advance(9 * time.Second)
	select {
	case <-early:
		t.Fatal("10s timer fired after 9s")
	default:
	}
	f.Advance(time.Second)
	select {
	case got := <-early:
		if want := start.Add(10 * time.Second); !got.Equal(want) {
			t.Fatalf("timer delivered %v, want %v", got, want)
		}
	default:
		t.Fatal("10s timer did not fire at 10s")
	}
	select {
	case <-late:
		t.Fatal("72h timer fired at 10s")
	default:
	}
	f.Advance(72 * time.Hour)
	select {
	case <-late:
	default:
		t.Fatal("72h timer did not fire")
	}
	if f.Waiters() != 0 {
		t.Fatalf("Waiters = %d after all fired", f.Waiters())
	}
}

func TestFakeAfterNonPositiveFiresAtOnce(t *testing.T) {
	f := NewFake(start)
	select {
	case <-f.After(0):
	default:
		t.Fatal("After(0) did not fire at once")
	}
}

func TestSystemClockIsWallTime(t *testing.T) {
	before := time.Now()
	got := System{}.Now()
	if got.Before(before) || got.After(time.Now()) {
		t.Fatalf("System.Now = %v outside [%v, now]", got, before)
	}
	select {
	case <-System{}.After(time.Millisecond):
	case <-time.After(5 * time.Second):
		t.Fatal("System.After(1ms) did not fire")
	}
}
