package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/libleases/libleases/core"
)

// maxHintProductions bounds the production names a missing production is
// compared with: the first ones in name order, one page.
const maxHintProductions = core.MaxPageSize

// withProductionHint says what to do about a production that does not
// exist: the nearest existing name, when one is near (suggest), else the
// command that creates it. Production names are no secret; the database is
// opened again only to read them, never created. Any failure of that read
// leaves the error as it was.
func withProductionHint(cc *cmdContext, err error) error {
	name, ok := core.MissingProduction(err)
	if !ok || cc == nil {
		return err
	}
	a, openErr := cc.openWith(false)
	if openErr != nil {
		return err
	}
	defer a.Close()
	page, listErr := a.ListProductions(context.Background(), core.ProductionQuery{Limit: maxHintProductions})
	if listErr != nil {
		return err
	}
	names := make([]string, 0, len(page.Productions))
	for _, p := range page.Productions {
		names = append(names, p.Name)
	}
	if best := suggest(name, names); best != "" {
		return fmt.Errorf("%w (did you mean \"%s\"? 'leases production list' lists them)", err, nameText(best))
	}
	return fmt.Errorf("%w; create it with: leases production create %s", err, shellWord(nameText(name)))
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9._/:@+=-]+$`)

// shellWord quotes s for a POSIX shell when it needs quoting.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
