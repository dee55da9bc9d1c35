// The one rewrite of a file created before incremental auto-vacuum into it
// (docs/schema.md, "Space comes back").
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/libleases/libleases/core/store"
)

// upgradeFreeShare is the share of a file's pages that must be free before
// UpgradeSpaceMode rewrites it: the share ReclaimSpace keeps free anyway.
// A file with fewer free pages would be copied whole to give back almost
// nothing.
const upgradeFreeShare = 8

// UpgradeSpaceMode rewrites a file whose auto-vacuum mode is none (created
// before schema 7, or by an opener that lost the race to create it) into
// incremental auto-vacuum, which SQLite allows only through VACUUM, once it
// has more than an eighth of its pages free. VACUUM copies the live pages
// into a temporary database and back through the WAL, so it needs free disk
// of about the live size twice (in the temporary directory and beside the
// file) and holds the writer lock until it is done; readers go on. It runs
// on the handle's writer connection, with the turn of this process's
// writer queue, so this process's writers wait for it in order and other
// processes' in SQLite's busy handler (up to their busy timeout). A failure
// rolls the VACUUM back: the file keeps its mode, its pages and its
// content, and stays usable.
func (s *DB) UpgradeSpaceMode(ctx context.Context) (bool, time.Duration, error) {
	r, err := s.db.Conn(ctx)
	if err != nil {
		return false, 0, classify(err)
	}
	mode, pages, free, pageSize, err := spaceMode(ctx, r)
	r.Close()
	if err != nil || mode != 0 || free*upgradeFreeShare <= pages {
		return false, 0, err
	}
	if ctx.Err() != nil {
		return false, 0, abandoned(ctx)
	}
	// An edit's turn: it is never handed an open group of the handle.
	g, ok := s.writers.acquire(store.HoldsCaller(ctx), time.Now().Add(s.busy), s.writer)
	if !ok {
		if g != nil {
			g.pass()
		}
		if ctx.Err() != nil {
			return false, 0, abandoned(ctx)
		}
		return false, 0, s.timedOut()
	}
	defer s.wal.yield() // after the turn is passed on
	defer s.writers.release()
	if err := s.file.check(); err != nil {
		s.file.release()
		return false, 0, err
	}
	c, err := s.writer.get(ctx)
	if err != nil {
		return false, 0, classify(err)
	}
	// Another process may have rewritten it meanwhile.
	if mode, pages, free, pageSize, err = spaceMode(ctx, c); err != nil || mode != 0 {
		return false, 0, err
	}
	begun := time.Now()
	_, err = c.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`)
	if err == nil {
		_, err = c.ExecContext(ctx, `VACUUM`)
	}
	if err == nil {
		err = c.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode)
		if err == nil && mode != 2 {
			err = fmt.Errorf("the file's auto-vacuum mode is %d after VACUUM, not 2 (incremental)", mode)
		}
	}
	held := time.Since(begun)
	if err != nil {
		// A fresh connection for the next writer: this one still carries
		// the mode asked for, and may be left in any state.
		s.writer.discard(c)
		err = s.file.explain(classify(err))
		rolledBack := fmt.Sprintf("the rewrite of the file into incremental auto-vacuum was rolled back, so the "+
			"file is unchanged and usable (it keeps reusing its %d free pages for new rows, but gives none back to "+
			"the file system)", free)
		switch {
		case ctx.Err() != nil:
			return false, held, fmt.Errorf("%w; %s", abandoned(ctx), rolledBack)
		case errors.Is(err, store.ErrReadOnly):
			return false, held, fmt.Errorf("%w; %s; this process may only read the file: prune from one that may "+
				"write it", err, rolledBack)
		case errors.Is(err, store.ErrBusy):
			return false, held, fmt.Errorf("%w; %s; another process held the writer lock for longer than the busy "+
				"timeout: prune again", err, rolledBack)
		}
		live := (pages - free) * pageSize
		return false, held, fmt.Errorf("%w; %s; the rewrite needs about %d MiB free beside the file and as much "+
			"in the temporary directory (SQLITE_TMPDIR, TMPDIR, else /var/tmp): once there is room, prune again",
			err, rolledBack, (live+(1<<20)-1)>>20)
	}
	// The WAL now holds the whole copy: a checkpoint that copies it all
	// cuts the file to its new size (best effort: a reader in the way
	// leaves it to the next checkpoint).
	_, _ = c.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
	return true, time.Since(begun), nil
}

// spaceMode reads the file's auto-vacuum mode, its pages, its free pages
// and the page size on c. The mode last: SQLite reads it from the file's
// header at the start of each transaction, so it is read after one (a
// connection that has not read since another one's VACUUM reports the
// mode of before).
func spaceMode(ctx context.Context, c *sql.Conn) (mode, pages, free, pageSize int64, err error) {
	for _, p := range []struct {
		name string
		to   *int64
	}{{"page_count", &pages}, {"freelist_count", &free}, {"page_size", &pageSize}, {"auto_vacuum", &mode}} {
		if err := c.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(p.to); err != nil {
			return 0, 0, 0, 0, classify(err)
		}
	}
	return mode, pages, free, pageSize, nil
}
