// Package server is the Floodgate daemon: it applies a config.Config's
// rules on up to four listeners.
//
//   - Gateway: a reverse proxy to one upstream that limits requests before
//     they reach it and adds the rate-limit fields to its responses.
//   - Decision API: POST /v1/check (one check or a JSON array of them),
//     GET /v1/limits/{key} to peek, DELETE /v1/limits/{key} to reset.
//   - Forward-auth: GET /v1/auth for Traefik ForwardAuth and Caddy
//     forward_auth (200 or 429), GET /v1/auth/nginx for nginx auth_request
//     (200 or 403, since nginx turns any other status into a 500).
//   - Admin: /metrics, /healthz, /readyz and POST /-/reload.
//
// Rules can be replaced while serving (Reload, Apply, Watch); the store and
// the listeners stay, so counters survive a reload. The shortest use:
//
//	cfg, err := config.Load("floodgate.yaml")
//	srv, err := server.New(cfg)
//	err = srv.Run(ctx) // until ctx ends, then a graceful shutdown
package server
