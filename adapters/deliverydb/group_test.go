package deliverydb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// fakeGroups is a groupCommitter whose commit records each group's size
// and, for the groups a test holds, waits for it to let them go.
type fakeGroups struct {
	g     *groupCommitter
	mu    sync.Mutex
	sizes []int
	hold  chan chan struct{} // a group receives from it when one is offered
}

func newFakeGroups(writers int) *fakeGroups {
	f := &fakeGroups{hold: make(chan chan struct{}, 1)}
	f.g = newGroupCommitter(&Store{}, writers, func(_ *groupCommitter, batch []*appendReq) {
		f.mu.Lock()
		f.sizes = append(f.sizes, len(batch))
		f.mu.Unlock()
		select {
		case release := <-f.hold:
			<-release
		default:
		}
		for i, r := range batch {
			r.ids = []uint64{uint64(i + 1)}
		}
	})
	return f
}

func (f *fakeGroups) groupSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sizes...)
}

// appendAsync starts n appends and returns a channel that closes when all
// are acknowledged.
func (f *fakeGroups) appendAsync(n int) chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = f.g.append(context.Background(), []ports.NewStoredEnvelope{{Topic: []byte{1}, Envelope: []byte{1}}})
		}()
	}
	go func() { wg.Wait(); close(done) }()
	return done
}

// waitFor waits until the writers took taken appends and waiting more
// wait to be taken.
func waitFor(t *testing.T, g *groupCommitter, taken, waiting int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for g.taken.Load() < taken || g.waiting.Load() < waiting {
		if time.Now().After(deadline) {
			t.Fatalf("%d appends taken, %d waiting; want %d and %d", g.taken.Load(), g.waiting.Load(), taken, waiting)
		}
		time.Sleep(time.Millisecond)
	}
}

// COMP-540: while a group commits, a second writer does not start a group
// beside it; the appends that arrive meanwhile all go into the next group.
func TestCOMP540_OneGroupAtATime(t *testing.T) {
	f := newFakeGroups(2)
	defer f.g.stop()
	f.g.takeover = time.Hour
	release := make(chan struct{})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	defer let() // before stop, also when the test fails
	f.hold <- release
	first := f.appendAsync(1)
	waitFor(t, f.g, 1, 0)
	rest := f.appendAsync(6)
	waitFor(t, f.g, 1, 6)
	if got := f.groupSizes(); len(got) != 1 {
		t.Fatalf("groups %v while the first group commits: a second writer started a group beside it", got)
	}
	let()
	<-first
	<-rest
	if got := f.groupSizes(); len(got) != 2 || got[1] != 6 {
		t.Fatalf("groups %v, want [1 6]: the appends queued during a group go into one next group", got)
	}
}

// COMP-540: a group that runs longer than the takeover time hands the
// turn on, so a stalled statement does not stop the other appends.
func TestCOMP540_StalledGroupHandsTheTurnOn(t *testing.T) {
	f := newFakeGroups(2)
	defer f.g.stop()
	f.g.takeover = 10 * time.Millisecond
	release := make(chan struct{})
	defer close(release)
	f.hold <- release
	_ = f.appendAsync(1)
	waitFor(t, f.g, 1, 0)
	select {
	case <-f.appendAsync(3):
	case <-time.After(10 * time.Second):
		t.Fatalf("groups %v: appends waited behind a stalled group past the takeover time", f.groupSizes())
	}
}

// COMP-541: a writer that finds fewer appends queued than its previous
// group held waits, within its bound, for the rest to arrive, and does
// not wait past the bound when they do not.
func TestCOMP541_GroupGathersThePreviousGroupsPublishers(t *testing.T) {
	f := newFakeGroups(1)
	defer f.g.stop()
	f.g.gather = true
	f.g.gatherMax = time.Hour
	f.g.last.Store(4)
	f.g.took.Store(int64(time.Hour))
	first := f.appendAsync(1)
	waitFor(t, f.g, 1, 0) // the writer has found one append and waits
	rest := f.appendAsync(3)
	for _, c := range []chan struct{}{first, rest} {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal("appends not acknowledged")
		}
	}
	if got := f.groupSizes(); len(got) != 1 || got[0] != 4 {
		t.Fatalf("groups %v, want [4]: the group waits for as many appends as the previous one held", got)
	}
	// The bound: a quarter of the previous group's time.
	h := newFakeGroups(1)
	defer h.g.stop()
	h.g.gather = true
	h.g.last.Store(100)
	h.g.took.Store(int64(4 * time.Millisecond))
	select {
	case <-h.appendAsync(1):
	case <-time.After(10 * time.Second):
		t.Fatal("a lone append waited past the gather bound")
	}
}

// refuseX makes the database refuse an envelope whose payload is "x".
func refuseX(t *testing.T, name string, s *Store) {
	t.Helper()
	q := `ALTER TABLE delivery_envelopes ADD CONSTRAINT test_no_x CHECK (envelope <> '\x78'::bytea)`
	if name == "sqlite" {
		q = `CREATE TRIGGER test_no_x BEFORE INSERT ON delivery_envelopes WHEN NEW.envelope = x'78' BEGIN SELECT RAISE(ABORT, 'refused'); END`
	}
	if err := s.db.Exec(q).Error; err != nil {
		t.Fatal(err)
	}
}

// A refused envelope in a group of concurrent appends fails its own
// append only: the others of its group are acknowledged and stored,
// whatever their topic (COMP-142: each append reports its own outcome).
func TestGroupCommit_RefusedEnvelopeSparesItsGroup(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			refuseX(t, name, s)
			ctx := context.Background()
			topics := [][]byte{topic(), topic(), topic()}
			const n = 9
			// A first group stalls (SQLite: in its transaction; PostgreSQL:
			// on its topic's row, which the test locks) until all the
			// appends have queued behind it.
			s.group.takeover = time.Hour
			stall := topic()
			if _, err := s.Append(ctx, []ports.NewStoredEnvelope{env(stall, 0)}); err != nil {
				t.Fatal(err)
			}
			unstall := make(chan struct{})
			var lockTx *sql.Tx
			if name == "sqlite" {
				var once sync.Once
				s.group.afterAppend = func(context.Context) { once.Do(func() { <-unstall }) }
			} else {
				var err error
				if lockTx, err = s.sqlDB.Begin(); err != nil {
					t.Fatal(err)
				}
				if _, err := lockTx.Exec(`SELECT 1 FROM delivery_topics WHERE topic = $1 FOR UPDATE`, stall); err != nil {
					t.Fatal(err)
				}
			}
			stalled := make(chan error, 1)
			go func() {
				_, err := s.Append(ctx, []ports.NewStoredEnvelope{env(stall, 1)})
				stalled <- err
			}()
			waitFor(t, s.group, 2, 0)
			groups0 := s.group.groups.Load()
			ids := make([][]uint64, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				e := env(topics[i%3], byte('a'+i))
				if i%4 == 1 {
					e.Envelope = []byte("x")
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids[i], errs[i] = s.Append(ctx, []ports.NewStoredEnvelope{e})
				}()
			}
			waitFor(t, s.group, 2, n)
			close(unstall)
			if lockTx != nil {
				if err := lockTx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-stalled; err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if g := s.group.groups.Load() - groups0; g != 1 {
				t.Fatalf("the %d appends ran in %d groups, want one", n, g)
			}
			for i := range n {
				if bad := i%4 == 1; bad != (errs[i] != nil) {
					t.Fatalf("append %d (refused: %v) returned %v", i, bad, errs[i])
				}
			}
			for ti, tp := range topics {
				got, err := s.Range(ctx, tp, 0, 100, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				var want []uint64
				for i := ti; i < n; i += 3 {
					if errs[i] == nil {
						want = append(want, ids[i][0])
					}
				}
				if len(got) != len(want) {
					t.Fatalf("topic %d holds %d envelopes, want the %d acknowledged", ti, len(got), len(want))
				}
				for _, e := range got {
					if bytes.Equal(e.Envelope, []byte("x")) {
						t.Fatalf("topic %d holds the refused envelope", ti)
					}
				}
			}
		})
	}
}

// published is what one append of a stream reported.
type published struct {
	topic, payload []byte
	id             uint64
	err            error
}

// checkAcknowledged checks, after a stream of appends, that every
// acknowledged envelope is stored at its id, that no id was acknowledged
// twice, that each topic's ids ascend, and, when exact, that the topics
// hold nothing else.
func checkAcknowledged(t *testing.T, s *Store, topics [][]byte, results []published, exact bool) {
	t.Helper()
	ctx := context.Background()
	byID := map[uint64]published{}
	for _, r := range results {
		if r.err != nil {
			continue
		}
		if prev, dup := byID[r.id]; dup {
			t.Fatalf("id %d acknowledged for %x and %x", r.id, prev.payload, r.payload)
		}
		byID[r.id] = r
	}
	stored := 0
	for _, tp := range topics {
		got, err := s.Range(ctx, tp, 0, 100000, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		var prev uint64
		for _, e := range got {
			if e.SequenceID <= prev {
				t.Fatalf("topic ids %d then %d: not ascending", prev, e.SequenceID)
			}
			prev = e.SequenceID
			if r, ok := byID[e.SequenceID]; ok {
				if !bytes.Equal(r.payload, e.Envelope) || !bytes.Equal(r.topic, tp) {
					t.Fatalf("id %d holds %x, acknowledged for %x", e.SequenceID, e.Envelope, r.payload)
				}
				stored++
			} else if exact {
				t.Fatalf("id %d (%x) is stored but was not acknowledged", e.SequenceID, e.Envelope)
			}
		}
	}
	if stored != len(byID) {
		t.Fatalf("%d of %d acknowledged envelopes are stored", stored, len(byID))
	}
}

// Publishers whose calls are cancelled at random points, many while their
// append waits in a group: every acknowledged envelope is stored at its
// id, and a cancelled append that was not acknowledged stored nothing
// (ports.EnvelopeStore.Append).
func TestGroupCommit_CancelMidGroupLosesNothingAcknowledged(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			topics := [][]byte{topic(), topic(), topic(), topic()}
			const publishers, each = 12, 25
			results := make([]published, publishers*each)
			var wg sync.WaitGroup
			for p := range publishers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						k := p*each + i
						tp := topics[k%len(topics)]
						payload := []byte(fmt.Sprintf("p%d-%d", p, i))
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(1500))*time.Microsecond)
						ids, err := s.Append(ctx, []ports.NewStoredEnvelope{{Topic: tp, Envelope: payload, ServerTimestampNS: 1}})
						cancel()
						results[k] = published{topic: tp, payload: payload, err: err}
						if err == nil {
							results[k].id = ids[0]
						} else if !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("append failed other than by its deadline: %v", err)
						}
					}
				}()
			}
			wg.Wait()
			acked := 0
			for _, r := range results {
				if r.err == nil {
					acked++
				}
			}
			t.Logf("%d of %d appends acknowledged before their deadline", acked, len(results))
			checkAcknowledged(t, s, topics, results, true)
		})
	}
}

// The database connection of a group is killed while its statement runs,
// again and again, under concurrent publishers: every acknowledged
// envelope is stored at its id, no id is acknowledged twice, each topic's
// ids ascend. (The killed groups' appends report ports.ErrUnavailable:
// their outcome is unknown, and they may be stored.)
func TestGroupCommit_ConnectionKilledMidGroup_Postgres(t *testing.T) {
	base := openPG(t) // skips without PostgreSQL; its schema is the one used
	app := "regroup_test_" + base.schema[len("regroup_delivery_"):]
	dsn := os.Getenv("REGROUP_POSTGRES_DSN")
	if u, err := url.Parse(dsn); err == nil && strings.Contains(dsn, "://") {
		q := u.Query()
		q.Set("application_name", app)
		u.RawQuery = q.Encode()
		dsn = u.String()
	} else {
		dsn += " application_name=" + app
	}
	s, err := OpenPostgres(context.Background(), dsn, &Options{Schema: base.schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	killer, err := sql.Open("pgx", os.Getenv("REGROUP_POSTGRES_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close()
	topics := [][]byte{topic(), topic(), topic()}
	const publishers = 8
	var (
		mu      sync.Mutex
		results []published
		failed  atomic.Int32
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				tp := topics[(p+i)%len(topics)]
				payload := []byte(fmt.Sprintf("p%d-%d", p, i))
				ids, err := s.Append(context.Background(), []ports.NewStoredEnvelope{{Topic: tp, Envelope: payload, ServerTimestampNS: 1}})
				r := published{topic: tp, payload: payload, err: err}
				if err == nil {
					r.id = ids[0]
				} else if errors.Is(err, ports.ErrUnavailable) {
					failed.Add(1)
				} else {
					t.Errorf("append: %v", err)
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for failed.Load() < 5 && time.Now().Before(deadline) {
		_, _ = killer.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND state = 'active' AND query LIKE '%delivery_append%'`, app)
		time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // appends go on after the last kill
	stop.Store(true)
	wg.Wait()
	if failed.Load() == 0 {
		t.Fatal("no group was killed mid-statement: the test proved nothing")
	}
	t.Logf("%d appends, %d failed with their connection", len(results), failed.Load())
	checkAcknowledged(t, base, topics, results, false)
}
