package core

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/libleases/libleases/core/store"
)

// MinJobIDPrefix is the shortest prefix of a job id that ResolveJobID
// accepts in place of the whole id (the 8 characters before the first
// hyphen, the id the status page and the demo show).
const MinJobIDPrefix = 8

// MaxJobIDCandidates bounds the ids an ambiguous prefix's error lists.
const MaxJobIDCandidates = 5

// ResolveJobID returns the job id that id names, for a caller that reads
// ids typed by people, the way git reads short hashes: a whole job id is
// returned as it is (an operation on it reports a missing job as always);
// a prefix of one, of at least MinJobIDPrefix characters, is the one job
// of production whose id begins with it, or of every production when
// production is "". No job is not_found; several are invalid_argument,
// the error listing at most MaxJobIDCandidates of them. Operations and
// tokens never take a prefix: only this lookup does.
func (a *Authority) ResolveJobID(ctx context.Context, production, id string) (string, error) {
	if _, ok := parseUUID(id); ok {
		return id, nil
	}
	if err := checkIDPrefix(id); err != nil {
		return "", err
	}
	var p store.Production
	if production != "" {
		var err error
		if p, err = a.observed(ctx, production); err != nil {
			return "", err
		}
	} else if err := a.usable(); err != nil {
		return "", err
	}
	from, to := idPrefixRange(id)
	rows, err := a.b.JobIDs(ctx, store.JobIDFilter{ProductionID: p.ID, From: from, To: to, Limit: MaxJobIDCandidates + 1})
	if err != nil {
		return "", storageErr("look up job id prefix", err)
	}
	var found []store.JobIDRow
	for _, r := range rows {
		if strings.HasPrefix(r.ID, id) && (p.ID == "" || r.ProductionID == p.ID) {
			found = append(found, r)
		}
	}
	switch {
	case len(found) == 1:
		return found[0].ID, nil
	case len(found) == 0 && production != "":
		return "", errf(KindNotFound, "no job id begins with %s in production %q", id, p.Name)
	case len(found) == 0:
		return "", errf(KindNotFound, "no job id begins with %s", id)
	}
	names := map[string]string{}
	var list []string
	for i, r := range found {
		if i == MaxJobIDCandidates {
			list = append(list, "and more")
			break
		}
		if production != "" {
			list = append(list, r.ID)
			continue
		}
		name, ok := names[r.ProductionID]
		if !ok {
			pr, err := a.b.ProductionByID(ctx, r.ProductionID)
			if err != nil {
				return "", storageErr("look up production", err)
			}
			name, names[r.ProductionID] = pr.Name, pr.Name
		}
		list = append(list, fmt.Sprintf("%s (production %q)", r.ID, name))
	}
	return "", errf(KindInvalidArgument, "job id prefix %s is ambiguous: it begins %s; give more of the id",
		id, strings.Join(list, ", "))
}

// IsJobIDPrefix reports whether s is a job id or a prefix of one that
// ResolveJobID would look up (at least MinJobIDPrefix characters): a search
// box that takes a key or an id asks it before looking s up as an id.
func IsJobIDPrefix(s string) bool { return checkIDPrefix(s) == nil }

// checkIDPrefix accepts a prefix of a job id's one spelling (parseUUID):
// lowercase hex, hyphens at 8, 13, 18 and 23, at least MinJobIDPrefix
// characters. The message quotes what it refuses, escaped.
func checkIDPrefix(s string) error {
	const rule = "must be a lowercase hyphenated UUID or a prefix of one of at least %d characters"
	if !utf8.ValidString(s) {
		return errf(KindInvalidArgument, "job id is not valid UTF-8: it "+rule, MinJobIDPrefix)
	}
	shape := "job id %q " + rule
	if len(s) < MinJobIDPrefix || len(s) > 36 {
		return errf(KindInvalidArgument, shape, s, MinJobIDPrefix)
	}
	for i := 0; i < len(s); i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return errf(KindInvalidArgument, shape, s, MinJobIDPrefix)
			}
		} else if _, ok := lowerHex(s[i]); !ok {
			return errf(KindInvalidArgument, shape, s, MinJobIDPrefix)
		}
	}
	return nil
}

// idPrefixRange is the range of ids that begin with prefix: [prefix, to),
// to the next prefix of the same shape (hex digits counted up with carry,
// hyphens kept), "" when there is none. Both ends are hex and hyphens in
// their fixed places, so the range is the same in any collation that
// orders hex digits as numbers, not only in byte order.
func idPrefixRange(prefix string) (from, to string) {
	b := []byte(strings.TrimRight(prefix, "-"))
	for i := len(b) - 1; i >= 0; i-- {
		switch c := b[i]; {
		case c == '-':
			continue
		case c == '9':
			b[i] = 'a'
			return prefix, string(b)
		case c == 'f':
			b[i] = '0'
			continue
		default:
			b[i] = c + 1
			return prefix, string(b)
		}
	}
	return prefix, ""
}
