package deliverydb

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// BenchmarkRangeByteBudget measures a 100-envelope page of 256-byte
// envelopes read with the byte budget applied in the query (COMP-141),
// and reports next to it the plain ordered LIMIT query that loads every
// row, timed in the same run on the same table: "budget/plain" is the
// cost of the budget. On SQLite, and on PostgreSQL with
// REGROUP_POSTGRES_DSN.
func BenchmarkRangeByteBudget(b *testing.B) {
	for name, open := range map[string]func(b *testing.B) *Store{
		"sqlite": func(b *testing.B) *Store {
			s, err := OpenSQLite(context.Background(), b.TempDir()+"/r.db", nil)
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"postgres": func(b *testing.B) *Store {
			if os.Getenv("REGROUP_POSTGRES_DSN") == "" {
				b.Skip("REGROUP_POSTGRES_DSN unset")
			}
			return benchPG(b)
		},
	} {
		b.Run(name, func(b *testing.B) {
			s := open(b)
			defer s.Close()
			ctx, tp := context.Background(), topic()
			var envs []ports.NewStoredEnvelope
			for i := 0; i < 1000; i++ {
				envs = append(envs, ports.NewStoredEnvelope{Topic: tp, Envelope: make([]byte, 256), ServerTimestampNS: 1})
			}
			if _, err := s.Append(ctx, envs); err != nil {
				b.Fatal(err)
			}
			var plain time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				after := uint64(i%900 + 1)
				if got, err := s.Range(ctx, tp, after, 100, 2<<20); err != nil || len(got) != 100 {
					b.Fatalf("Range = %d, %v", len(got), err)
				}
				b.StopTimer()
				start := time.Now()
				var rows []envelopeRow
				if err := s.db.WithContext(ctx).Where("topic = ? AND sequence_id > ?", blob(tp), int64(after)).
					Order("sequence_id").Limit(100).Find(&rows).Error; err != nil || len(rows) != 100 {
					b.Fatalf("plain query = %d, %v", len(rows), err)
				}
				plain += time.Since(start)
				b.StartTimer()
			}
			budget := b.Elapsed()
			b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "plain-ns/op")
			b.ReportMetric(float64(budget)/float64(plain), "budget/plain")
		})
	}
}
