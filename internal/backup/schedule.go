package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Scheduled snapshots are named capstan-<UTC time>.backup, so that their
// names sort by age.
const (
	scheduledPrefix = "capstan-"
	scheduledSuffix = ".backup"
	scheduledTime   = "20060102T150405.000Z"
)

// Schedule takes snapshots at a fixed interval and keeps the newest few.
type Schedule struct {
	// Dir receives the snapshots; it is created with mode 0700.
	Dir string
	// Every is the interval between two snapshots; the first is taken
	// one interval after Run starts.
	Every time.Duration
	// Keep is how many snapshots stay; older ones are removed.
	Keep int
	// Take writes one snapshot to the path it is given.
	Take func(ctx context.Context, path string) error
	Log  logr.Logger
}

// Validate names the flag to fix when the schedule cannot run.
func (s Schedule) Validate() error {
	if s.Every <= 0 {
		return fmt.Errorf("--backup-every must be a positive duration such as 1h, not %s", s.Every)
	}
	if s.Keep < 1 {
		return fmt.Errorf("--backup-keep must be at least 1, not %d", s.Keep)
	}
	return nil
}

// Run takes a snapshot every interval until ctx ends. A snapshot that
// fails is logged and the schedule goes on: the next may succeed.
func (s Schedule) Run(ctx context.Context) {
	ticker := time.NewTicker(s.Every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			path, removed, err := s.Once(ctx, now)
			if err != nil {
				if ctx.Err() == nil {
					s.Log.Error(err, "Scheduled backup failed", "dir", s.Dir)
				}
				continue
			}
			s.Log.Info("Scheduled backup written", "path", path, "removed", len(removed))
		}
	}
}

// Once takes one snapshot named after now, then removes the oldest beyond
// Keep; it returns the new snapshot's path and the removed ones.
func (s Schedule) Once(ctx context.Context, now time.Time) (string, []string, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("creating the backup directory: %w", err)
	}
	path := filepath.Join(s.Dir, scheduledPrefix+now.UTC().Format(scheduledTime)+scheduledSuffix)
	if err := s.Take(ctx, path); err != nil {
		return "", nil, err
	}
	removed, err := Prune(s.Dir, s.Keep)
	return path, removed, err
}

// Prune removes the oldest scheduled snapshots of dir beyond keep and
// returns their paths. Files of other names are left alone.
func Prune(dir string, keep int) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, scheduledPrefix) && strings.HasSuffix(n, scheduledSuffix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var removed []string
	for len(names) > keep {
		p := filepath.Join(dir, names[0])
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return removed, err
		}
		removed = append(removed, p)
		names = names[1:]
	}
	return removed, nil
}
