package ops

import "github.com/floodgate/floodgate/httplimit"

// Observers fans one decision out to several observers, in order. A nil
// entry is skipped.
type Observers []httplimit.Observer

// Observe implements httplimit.Observer.
func (os Observers) Observe(e httplimit.Event) {
	for _, o := range os {
		if o != nil {
			o.Observe(e)
		}
	}
}
