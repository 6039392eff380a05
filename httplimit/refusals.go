package httplimit

import "github.com/floodgate/floodgate/internal/refusallog"

// DefaultRefusalLogInterval is how often at most one key's refusals of one
// rule are logged (Config.RefusalLogInterval).
const DefaultRefusalLogInterval = refusallog.DefaultInterval

// refusalLog is the bound on refusal records every door shares.
type refusalLog = refusallog.Log

var newRefusalLog = refusallog.New
