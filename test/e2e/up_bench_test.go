package e2e

import (
	"testing"
	"time"

	"capstan.dev/capstan/internal/procstat"
)

// BenchmarkUp measures what a user waits for and what the plane costs:
// `capstan up` wall time to ready on a fresh state directory and on a
// restart over existing state, and the resident memory at ready.
//
//	make build && CAPSTAN_BIN=$PWD/bin/capstan go test ./test/e2e -run '^$' -bench Up -benchtime 3x
func BenchmarkUp(b *testing.B) {
	var first, restart time.Duration
	var rss, hwm float64
	for i := 0; i < b.N; i++ {
		p := newPlane(b)
		start := time.Now()
		p.up()
		first += time.Since(start)
		p.down()

		start = time.Now()
		p.up()
		restart += time.Since(start)
		r, h := memoryOf(b, p.pid())
		rss += r
		hwm += h
		p.down()
	}
	n := float64(b.N)
	b.ReportMetric(first.Seconds()/n, "first-up-s")
	b.ReportMetric(restart.Seconds()/n, "restart-up-s")
	b.ReportMetric(rss/n, "rss-MiB")
	b.ReportMetric(hwm/n, "peak-rss-MiB")
	b.ReportMetric(0, "ns/op")
}

// memoryOf reads a process's resident and peak resident set, in MiB.
func memoryOf(b *testing.B, pid int) (rss, peak float64) {
	b.Helper()
	u, err := procstat.Read(pid)
	if err != nil {
		b.Fatal(err)
	}
	return u.RSSMiB, u.PeakRSSMiB
}
