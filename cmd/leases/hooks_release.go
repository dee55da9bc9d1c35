//go:build !leasestest

// Release builds have no test hooks: the functions below do nothing, so no
// environment variable can change how a shipped leases binary behaves.
package main

import (
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

const testHooks = false

func tokenWriteHook() (restore func()) { return func() {} }

func execRenewalDisabled() bool { return false }

func claimCommitHook(*core.Authority) {}

func pausePoint(string) {}

func workLeaseHook(*core.Lease) {}

func openOptionsHook(*leases.Options) {}
