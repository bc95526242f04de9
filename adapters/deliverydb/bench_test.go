package deliverydb

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// BenchmarkAppend measures one-envelope Append transactions (shared
// counter update, topic row upsert, insert) on SQLite; BenchmarkRawInsertReference is the same
// database's plain single-row insert in the same run, the reference to
// read it against.
func BenchmarkAppend(b *testing.B) {
	s, err := OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "b.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, t, payload := context.Background(), topic(), make([]byte, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Append(ctx, []ports.NewStoredEnvelope{{Topic: t, Envelope: payload, ServerTimestampNS: 1}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

func BenchmarkRawInsertReference(b *testing.B) {
	s, err := OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "b.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.db.Exec(`CREATE TABLE raw_ref (id INTEGER PRIMARY KEY, topic BLOB, payload BLOB)`).Error; err != nil {
		b.Fatal(err)
	}
	t, payload := topic(), make([]byte, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.db.Exec(`INSERT INTO raw_ref (topic, payload) VALUES (?, ?)`, blob(t), blob(payload)).Error; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}
