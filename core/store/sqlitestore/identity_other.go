//go:build !linux

// Elsewhere than Linux no claim on a database's name is taken: a second
// opener of a removed file's path is not detected (docs/schema.md).
package sqlitestore

type dirClaim struct{}

func claimName(string) *dirClaim { return nil }
func (*dirClaim) close()         {}
func heldByAnother(string) bool  { return false }
