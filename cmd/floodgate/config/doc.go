// Package config reads the YAML file of the Floodgate daemon: its listeners
// (gateway, decision API, forward-auth, admin), its store, named policies,
// rules, trusted proxies and response headers.
//
// Load is strict: an unknown field, a value of the wrong type, a bad
// duration, an unknown policy name or a policy that can never be enforced
// is an error naming the file, the line and the field, and every such error
// is reported at once, not just the first:
//
//	cfg, err := config.Load("floodgate.yaml")
//	var errs config.Errors
//	if errors.As(err, &errs) {
//		for _, e := range errs {
//			fmt.Println(e) // floodgate.yaml:12: rules[0].policies[0]: unknown policy "logn" (defined: api, login)
//		}
//	}
//
// String values may name environment variables as ${NAME} or
// ${NAME:-default}, so secrets (admin tokens, Redis passwords, bypass
// tokens) stay out of the file; "$$" writes a literal "$". A variable that
// is unset and has no default is an error.
//
// docs/CONFIG.md documents every field with its default and an example.
package config
