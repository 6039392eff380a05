package httplimit

import "github.com/floodgate/floodgate/refusallog"

// DefaultRefusalLogInterval is how often at most one key's refusals of one
// rule are logged (Config.RefusalLogInterval).
const DefaultRefusalLogInterval = refusallog.DefaultInterval
