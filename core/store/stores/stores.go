// Package stores opens the store a location names: a postgres:// or
// postgresql:// URL (any letter case) is PostgreSQL, anything else the path
// of a SQLite file. Package leases (the module root) and core's own tests
// open authorities through it; core itself names no concrete store.
package stores

import (
	"fmt"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/pgstore"
	"github.com/libleases/libleases/core/store/sqlitestore"
)

// Options tune Open. The zero value is the safe default.
type Options struct {
	// BusyTimeout bounds every wait for a lock (default 10s): SQLite's
	// writer lock, PostgreSQL's row locks (its lock_timeout) and pooled
	// connections.
	BusyTimeout time.Duration
	// Synchronous is "FULL" (default), "EXTRA" or "NORMAL", for SQLite only.
	// NORMAL can lose an acknowledged claim on power loss; it exists for
	// benchmarks.
	Synchronous string
	// MustExist refuses to create an authority: a SQLite file that does not
	// exist, or a PostgreSQL schema without one, is store.ErrNotExist, and
	// nothing is created. An existing authority of an older schema is still
	// migrated.
	MustExist bool
}

// IsPostgres reports whether location selects the PostgreSQL store.
func IsPostgres(location string) bool { return pgstore.IsURL(location) }

// Name is location as a message may show it: a URL's password replaced.
func Name(location string) string {
	if IsPostgres(location) {
		return pgstore.Redact(location)
	}
	return location
}

// Open opens (creating, unless opts.MustExist, and migrating) the store at
// location.
func Open(location string, opts Options) (store.Backend, error) {
	if IsPostgres(location) {
		if opts.Synchronous != "" {
			return nil, fmt.Errorf("%w: synchronous is a SQLite setting; PostgreSQL commits durably", store.ErrInvalid)
		}
		return pgstore.Open(location, pgstore.Options{BusyTimeout: opts.BusyTimeout, MustExist: opts.MustExist})
	}
	// The SQLite store dates a migration from this host's clock (PostgreSQL
	// dates it from the server's).
	now := func() int64 { return time.Now().UnixMicro() }
	return sqlitestore.Open(location, sqlitestore.Options{BusyTimeout: opts.BusyTimeout, Synchronous: opts.Synchronous,
		MustExist: opts.MustExist}, now)
}
