package config

import "github.com/floodgate/floodgate"

// FailsClosed names what refuses requests while the store fails: the
// store's own failure mode ("store.failure_mode", used by the decision
// API's ad-hoc policies and the Envoy RLS face) or the first limiting
// rule whose mode is fail-closed ("rule NAME"). It is "" when every answer
// is fail-open or fail-to-local: then a replica answers as configured
// without its store, and /readyz stays 200 (docs/DEPLOY.md).
func (c *Config) FailsClosed() string {
	if c.Store.FailureMode == floodgate.FailClosed {
		return "store.failure_mode"
	}
	for i, r := range c.Rules {
		if !r.Skip && c.FailureMode(i) == floodgate.FailClosed {
			return "rule " + r.Name
		}
	}
	return ""
}
