package memorystore_test

import "github.com/floodgate/floodgate"

// one is a cost of one request.
var one = floodgate.Cost{Requests: 1}
