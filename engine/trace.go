package engine

import "context"

// Tracer wraps decisions: Start runs before one, with the request's
// context and the rule's name, and returns the context the decision runs
// in (the store calls' too) and a func that Decide calls with the
// outcome when it is made, or nil when there is nothing to record (an
// unsampled decision), which spares the outcome a copy on the heap.
type Tracer interface {
	Start(ctx context.Context, rule string) (context.Context, func(*Outcome))
}

// Decide runs the rule for one request; see the package doc for the order
// of its steps. A refused request holds no slot; an admitted one may, so
// the caller must Release the Outcome when the request's work ends.
func (c *Compiled) Decide(ctx context.Context, req Request) Outcome {
	if t := c.e.tracer; t != nil {
		ctx, end := t.Start(ctx, c.name)
		out := c.decide(ctx, req)
		if end != nil {
			// Declared here, the copy end sees escapes only when traced.
			traced := out
			end(&traced)
		}
		return out
	}
	return c.decide(ctx, req)
}
